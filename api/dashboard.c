/* dashboard.c — GET /: one self-contained page (no external resources) over the JSON API: jobs, a loss plot, controls. */
#include <stdlib.h>
#include <string.h>

#include "handlers.h"

/*
 * The page holds no data: everything comes from the API with fetch(), with the bearer
 * token typed into the page (kept in the browser's localStorage) when traind has one.
 */
static const char page[] =
"<!doctype html>\n"
"<html lang=\"en\"><head><meta charset=\"utf-8\"><title>traind</title>\n"
"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
"<style>\n"
"body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}h1{font-size:1.3em;margin:0 0 .5em}\n"
"table{border-collapse:collapse;width:100%}td,th{padding:.3em .6em;border-bottom:1px solid #ddd;text-align:left}\n"
"tr.job{cursor:pointer}tr.job:hover,tr.sel{background:#eef4ff}.num{text-align:right;font-variant-numeric:tabular-nums}\n"
"#err{color:#b00}canvas{border:1px solid #ccc;margin-top:1em;max-width:100%}button{margin-right:.4em}\n"
".succeeded{color:#070}.failed{color:#b00}.running{color:#05a}.paused{color:#a60}.cancelled{color:#777}\n"
"</style></head><body>\n"
"<h1>traind</h1>\n"
"<p>Token: <input id=\"tok\" type=\"password\" size=\"40\" placeholder=\"only if traind has --token-file\">\n"
"<span id=\"ver\"></span> <span id=\"err\"></span></p>\n"
"<table><thead><tr><th>id</th><th>name</th><th>state</th><th>device</th><th class=\"num\">iteration</th>\n"
"<th class=\"num\">of</th><th class=\"num\">loss</th><th class=\"num\">eta s</th><th>created</th></tr></thead>\n"
"<tbody id=\"jobs\"></tbody></table>\n"
"<div id=\"detail\" hidden><h2 id=\"title\"></h2>\n"
"<button data-v=\"pause\">pause</button><button data-v=\"resume\">resume</button>\n"
"<button data-v=\"cancel\">cancel</button> <a id=\"ckpt\" href=\"#\">checkpoint</a>\n"
"<pre id=\"msg\"></pre><canvas id=\"plot\" width=\"900\" height=\"320\"></canvas></div>\n"
"<script>\n"
"'use strict';\n"
"const $=id=>document.getElementById(id);let sel=null;\n"
"$('tok').value=localStorage.getItem('traind-token')||'';\n"
"$('tok').onchange=()=>{localStorage.setItem('traind-token',$('tok').value);refresh();};\n"
"function hdr(){const t=$('tok').value;return t?{Authorization:'Bearer '+t}:{};}\n"
"async function api(path,method){const r=await fetch(path,{method:method||'GET',headers:hdr()});\n"
" const b=await r.json().catch(()=>null);if(!r.ok)throw new Error((b&&b.error&&b.error.message)||r.status);return b;}\n"
"function cell(tr,text,cls){const td=document.createElement('td');td.textContent=text;if(cls)td.className=cls;tr.appendChild(td);}\n"
"function fmt(x,d){return x==null?'':Number(x).toPrecision(d||5);}\n"
"async function refresh(){try{\n"
" const v=await api('/version');$('ver').textContent='traind '+v.version+(v.cuda?' (CUDA '+v.cuda+')':'');\n"
" const l=await api('/jobs?limit=50');const tb=$('jobs');tb.textContent='';\n"
" for(const j of l.jobs){const tr=document.createElement('tr');tr.className='job'+(j.id===sel?' sel':'');\n"
"  cell(tr,j.id);cell(tr,j.name||'');cell(tr,j.state,j.state);cell(tr,j.device||'');\n"
"  cell(tr,j.progress.iteration,'num');cell(tr,j.progress.iterations,'num');\n"
"  cell(tr,j.metrics?fmt(j.metrics.loss):'','num');cell(tr,j.progress.eta_s==null?'':Math.round(j.progress.eta_s),'num');\n"
"  cell(tr,j.created_at);tr.onclick=()=>{sel=j.id;refresh();};tb.appendChild(tr);}\n"
" if(sel)await detail();$('err').textContent='';}catch(e){$('err').textContent=e.message;}}\n"
"async function detail(){const j=await api('/jobs/'+sel);$('detail').hidden=false;\n"
" $('title').textContent=(j.name||j.id)+' \\u2014 '+j.state;\n"
" $('msg').textContent=j.error?j.error.code+': '+j.error.message:'';\n"
" $('ckpt').hidden=!j.checkpoint;$('ckpt').onclick=async ev=>{ev.preventDefault();\n"
"  const r=await fetch('/jobs/'+sel+'/checkpoint',{headers:hdr()});if(!r.ok)return;\n"
"  const a=document.createElement('a');a.href=URL.createObjectURL(await r.blob());a.download=sel+'.safetensors';a.click();};\n"
" const m=await api('/jobs/'+sel+'/metrics?max_points=900');plot(m);}\n"
"function plot(m){const c=$('plot'),g=c.getContext('2d'),W=c.width,H=c.height,P=40;g.clearRect(0,0,W,H);\n"
" const li=m.columns.indexOf('loss'),ei=m.columns.indexOf('eval_loss'),pts=m.rows.filter(r=>r[li]!=null&&r[li]>0);if(!pts.length)return;\n"
" const ev=ei<0?[]:m.rows.filter(r=>r[ei]!=null&&r[ei]>0);\n"
" const xs=pts.map(r=>r[0]),ys=pts.map(r=>Math.log10(r[li])),es=ev.map(r=>Math.log10(r[ei]));\n"
" const x0=Math.min(...xs),x1=Math.max(...xs)||1,y0=Math.min(...ys,...es),y1=Math.max(...ys,...es);\n"
" const X=x=>P+(W-2*P)*(x-x0)/((x1-x0)||1),Y=y=>H-P-(H-2*P)*(y-y0)/((y1-y0)||1);\n"
" const line=(rs,vs,col)=>{g.strokeStyle=col;g.beginPath();rs.forEach((r,i)=>{const f=i?g.lineTo:g.moveTo;f.call(g,X(r[0]),Y(vs[i]));});g.stroke();};\n"
" line(pts,ys,'#05a');if(ev.length){line(ev,es,'#c50');g.fillStyle='#c50';g.fillText('eval_loss',W-P-60,P-8);}\n"
" g.fillStyle='#222';g.fillText('loss (log10) '+y1.toFixed(2),4,P-8);g.fillText(y0.toFixed(2),4,H-P);\n"
" g.fillText('iteration '+x0,P,H-P+16);g.fillText(String(x1),W-P-30,H-P+16);}\n"
"document.querySelectorAll('#detail button').forEach(b=>b.onclick=async()=>{\n"
" try{await api('/jobs/'+sel+'/'+b.dataset.v,'POST');}catch(e){$('err').textContent=e.message;}refresh();});\n"
"refresh();setInterval(refresh,2000);\n"
"</script></body></html>\n";

void api_get_dashboard(const struct api_ctx *ctx, struct api_response *resp)
{
    char *copy = malloc(sizeof page);
    if (!copy) {
        api_error(resp, 500, "internal", "out of memory");
        return;
    }
    memcpy(copy, page, sizeof page);
    resp->status = 200;
    resp->text = copy;
    resp->text_len = sizeof page - 1;
    resp->content_type = "text/html; charset=utf-8";
}
