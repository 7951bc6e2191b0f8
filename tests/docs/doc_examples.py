#!/usr/bin/env python3
"""doc_examples.py SRC_ROOT — runs every HTTP example of README.md and docs/*.md against a real
traind on loopback with the DC-taxi sample data, and every script in clients/curl-examples.

Each fenced ```sh block is cut into commands; those that talk to the daemon (curl, the client
scripts) run in one bash per block, with the address, job ids and data paths of the docs replaced
by this daemon's. A response is checked against what the doc shows after the command: an inline
`# {...}` comment or `# NNN` status, or the ```json block that follows in the same section. The
check is the status and the JSON's shape (keys both ways, and types; `null` and `{"...": ...}`
match anything, `, ...` ends a list). The numbers the docs quote from the DC-taxi baseline (the
README's iterations and model, the job example's loss and parameters, the predict example) are
compared with this run's, to the digits the doc prints, and GET /version's example with what this
build reports, field by field. Exit 0 when everything holds, 1 otherwise.
Needs curl and jq (exit 1 naming the tool when one is missing).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
DOCS = ["README.md", "docs/api.md"]
EXAMPLES = os.path.join(SRC, "clients", "curl-examples")
DOC_ID = re.compile(r"3f9c0a1b2c3d4e5f|e539da390fe2b063|<id>")
failures = []


def fail(where, msg):
    failures.append(f"{where}: {msg}")
    print(f"not ok: {where}: {msg}", flush=True)


# ---------------------------------------------------------------- the daemon and the sample data
class Daemon:
    def __init__(self, bin_path, work):
        self.work = work
        port_file = os.path.join(work, "port")
        self.log = open(os.path.join(work, "traind.log"), "w")
        self.proc = subprocess.Popen(
            [bin_path, "--listen", "127.0.0.1:0", "--port-file", port_file, "--data-root", work,
             "--state-dir", work + ".state", "--gpus", "none", "--cpu-workers", "2"],
            cwd=work, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            if self.proc.poll() is not None:
                raise SystemExit("traind exited at start; see " + self.log.name)
            time.sleep(0.05)
        self.url = "http://127.0.0.1:" + open(port_file).read().strip()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = -1
        if rc != 0:
            fail("traind", f"exited {rc} on SIGTERM; its log: {self.log.name}")


def api(d, method, path, body=None):
    args = ["curl", "-sS", "-X", method, "-w", "\n%{http_code}", d.url + path]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    text, code = out.rsplit("\n", 1)
    return int(code), (json.loads(text) if text.strip() else None)


def wait_done(d, job_id, timeout=240):
    t0 = time.time()
    while time.time() - t0 < timeout:
        _, job = api(d, "GET", "/jobs/" + job_id)
        if job["state"] in ("succeeded", "failed", "cancelled"):
            return job
        time.sleep(0.1)
    raise SystemExit(f"job {job_id} did not end in {timeout} s")


def wait_state(d, job_id, states, timeout=60):
    t0 = time.time()
    while time.time() - t0 < timeout:
        _, job = api(d, "GET", "/jobs/" + job_id)
        if job["state"] in states:
            return job
        time.sleep(0.05)
    raise SystemExit(f"job {job_id} never reached {states}: {job['state']} {job.get('error')}")


# ---------------------------------------------------------------- the docs' fenced blocks
def blocks(path):
    """(lang, text, first line, section) for each fenced block of a markdown file."""
    out, section, lang, buf, start = [], "", None, [], 0
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if lang is None and line.startswith("#") and not line.startswith("#!"):
            section = line.strip()
        if line.startswith("```"):
            if lang is None:
                lang, buf, start = line[3:].strip(), [], n + 1
            else:
                out.append((lang, "".join(buf), start, section))
                lang = None
            continue
        if lang is not None:
            buf.append(line)
    return out


def commands(text):
    """A block's commands: lines joined while a single quote is open or a line ends in '\\';
    a loop (while, until, for) runs from its first line to its `done`."""
    out, cur, loop = [], "", False
    for line in text.splitlines():
        cur = cur + "\n" + line if cur else line
        if re.match(r"(while|until|for)\b", cur) and not re.search(r"(^|;\s*)done\b", line):
            continue
        code = cur.split(" #")[0] if cur.count("'") % 2 == 0 else cur
        if code.count("'") % 2 == 1 or cur.rstrip().endswith("\\"):
            continue
        out.append(cur)
        cur = ""
    if cur:
        out.append(cur)
    return [c for c in out if c.strip() and not c.lstrip().startswith("#")]


def split_comment(cmd):
    """The command without its trailing `# comment` (outside quotes), and the comment."""
    q = None
    for i, ch in enumerate(cmd):
        if ch in "'\"" and (q is None or q == ch):
            q = None if q else ch
        elif ch == "#" and q is None and i > 0 and cmd[i - 1] in " \t":
            return cmd[:i].rstrip(), cmd[i + 1:].strip()
    return cmd, ""


def runnable(cmd):
    """Whether the command talks to the daemon (and needs nothing the test has not: S3, tokens)."""
    if "s3://" in cmd or "token" in cmd or "AWS_" in cmd:
        return False
    if re.match(r"\s*(while|until|for)\b", cmd):   # a loop: run whole
        return True
    return bool(re.match(r"\s*(curl |clients/curl-examples/|\w+=\$\(clients/curl-examples/|since=|while )", cmd))


def doc_json(text):
    """A doc's JSON, where `...` stands for more of the same: `, ...` is dropped."""
    text = re.sub(r",\s*\.\.\.(?=\s*[\]}])", "", text)
    return json.loads(text)


def kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return type(v).__name__


def shape(doc, got, where):
    """Errors where got's keys and types differ from doc's ({"...": x} and null match anything)."""
    if doc is None or got is None:
        return []
    if kind(doc) != kind(got):
        return [f"{where}: the doc shows {kind(doc)}, the daemon sends {kind(got)}"]
    errs = []
    if isinstance(doc, dict):
        if "..." in doc:
            return []
        for k in doc:
            if k not in got:
                errs.append(f"{where}.{k}: shown in the doc, not sent")
            else:
                errs += shape(doc[k], got[k], f"{where}.{k}")
        errs += [f"{where}.{k}: sent, not in the doc" for k in got if k not in doc]
    elif isinstance(doc, list) and doc and got:
        errs += shape(doc[0], got[0], f"{where}[0]")
    return errs


# ---------------------------------------------------------------- running a block
PRELUDE = r"""
curl() {  # the doc's curl, with the status after the body for the checker
  local i=$((__n++)); printf '\n__CMD_%d__\n' "$i"; command curl -w '\n__STATUS__%{http_code}\n' "$@"; }
__n=0
"""


def substitute(cmd, env, control=False):
    # The docs' data folder is the sample's: its part*.csv, or single partitions of it.
    cmd = cmd.replace("file:///srv/data/dc-taxi/csv/dev/", env["TRAIN_URL"][:-len("part*.csv")])
    cmd = re.sub(r"(http://)?(localhost|127\.0\.0\.1):8470", env["T"], cmd)
    cmd = cmd.replace("clients/curl-examples/", EXAMPLES + "/")
    cmd = cmd.replace("NEXT_AFTER", env["DONE_ID"])
    # A block of control verbs needs a job that has not ended; DELETE one that has, and is not
    # needed later.
    if control:
        ids = env["LIVE_ID"]
    elif "-X DELETE" in cmd:
        ids = env["DELETE_ID"]
    else:
        ids = env["DONE_ID"]
    return DOC_ID.sub(ids, cmd)


def expected_status(cmd, comment):
    m = re.match(r"(\d{3})\b", comment)
    if m:
        return int(m.group(1))
    return 201 if re.search(r"-X POST \S+/jobs['\"]?\s", cmd + " ") else 200


def run_block(where, text, following_json, env, control):
    cmds = [c for c in commands(text) if runnable(c)]
    if not cmds:
        return
    script, checks = [PRELUDE], []
    for c in cmds:
        if re.match(r"\s*(while|until|for)\b", c):   # the doc's own curl: its output is the loop's
            script.append("( unset -f curl\n" + substitute(c, env, control) + "\n)")
            continue
        code, comment = split_comment(c)
        if code.lstrip().startswith("curl "):
            script.append(substitute(code, env, control))
        else:   # a client script: it must succeed, wherever it stands in the block
            first = code.strip().splitlines()[0].replace("'", "")
            script.append("{ " + substitute(code, env, control) + "\n} || printf '\\n__FAILED__%s\\n' '" + first + "'")
        if code.lstrip().startswith("curl "):
            inline = None
            if comment.startswith("{"):
                inline, _ = json.JSONDecoder().raw_decode(comment)
            checks.append((code, expected_status(code, comment), inline))
    bash = "\n".join(script) + "\n"
    try:
        r = subprocess.run(["bash", "-c", bash], capture_output=True, text=True, cwd=env["WORK"], timeout=60,
                           env={**os.environ, "T": env["T"], "TRAIND_URL": env["T"], "id": env["DONE_ID"]})
    except subprocess.TimeoutExpired:
        fail(where, "did not finish in 60 s")
        return
    if r.returncode != 0:
        fail(where, f"exit {r.returncode}: {r.stderr.strip()[-400:]}")
    for failed in re.findall(r"__FAILED__(.*)", r.stdout):
        fail(where, f"`{failed}` failed: {r.stderr.strip()[-300:]}")
    parts = re.split(r"\n__CMD_(\d+)__\n", "\n" + r.stdout)
    answers = {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}
    # A lone curl without an inline comment is what the following ```json block shows.
    if following_json is not None and len(checks) == 1 and checks[0][2] is None:
        checks[0] = (checks[0][0], checks[0][1], following_json)
    for i, (code, status, want) in enumerate(checks):
        out = answers.get(i, "")
        m = re.search(r"\n?__STATUS__(\d{3})\n?$", out)
        if not m:
            fail(where, f"no answer for `{code.splitlines()[0]}`")
            continue
        body = out[:m.start()]
        if int(m.group(1)) != status:
            fail(where, f"`{code.splitlines()[0]}`: HTTP {m.group(1)}, the doc says {status}: {body[:300]}")
        if want is not None:
            try:
                got = json.loads(body)
            except ValueError:
                fail(where, f"`{code.splitlines()[0]}`: the answer is not JSON: {body[:200]}")
                continue
            for e in shape(want, got, "response"):
                fail(where, f"`{code.splitlines()[0]}`: {e}")
            if re.search(r"/version\b", code):
                check_version(where, want, got)
    env["ran"].update(re.findall(r"clients/curl-examples/([\w.-]+\.sh)", text))


def check_version(where, doc, got):
    """GET /version's example is what this build reports: the same version and CUDA runtime
    (a build without CUDA reports null, as the doc says), and cuBLAS not loaded yet. `driver` is
    the machine's: the doc's null is a machine without one."""
    for key in ("version", "cuda", "cublas", "driver"):
        if got.get(key) == doc.get(key):
            continue
        if key == "cuda" and got.get(key) is None:
            continue   # built without CUDA
        if key == "driver" and doc.get(key) is None:
            continue   # this machine has a driver
        fail(where, f"GET /version: the doc shows {key} {doc.get(key)!r}, this build reports {got.get(key)!r}")


# ---------------------------------------------------------------- the baseline's numbers
def check_numbers(d, env, base_job, watch_out):
    readme = open(os.path.join(SRC, "README.md"), encoding="utf-8").read()
    # The README's iteration lines and final model are this run's, to the digits printed.
    got_mse = dict(re.findall(r"Iteration: (\d+),.*MSE: (\S+)", watch_out))
    for it, mse in re.findall(r"Iteration: (\d+),.*MSE: (\S+)", readme):
        if got_mse.get(it) != mse:
            fail("README.md", f"iteration {it} shows MSE {mse}; the baseline gives {got_mse.get(it)}")
    m = re.search(r"final model of job \S+ \((\w+), MSE (\S+)\):\n\s+w = \[([^\]]*)\]\n\s+b = \[([^\]]*)\]", readme)
    if not m:
        fail("README.md", "the final model lines are missing")
    else:
        params = base_job["parameters"]
        w = [row[0] for row in params["w"]]
        if m.group(1) != base_job["state"] or m.group(2) != f"{base_job['metrics']['loss']:.2f}":
            fail("README.md", f"final model: {m.group(1)}, MSE {m.group(2)}; the run: {base_job['state']}, "
                 f"{base_job['metrics']['loss']:.2f}")
        shown = [float(x) for x in m.group(3).split(",") if x.strip() not in ("", "...")]
        for i, v in enumerate(shown):
            if abs(v - w[i]) > 1e-9 * abs(w[i]):
                fail("README.md", f"w[{i}] is {v}; the baseline gives {w[i]!r}")
        if abs(float(m.group(4)) - params["b"][0][0]) > 1e-9 * abs(params["b"][0][0]):
            fail("README.md", f"b is {m.group(4)}; the baseline gives {params['b'][0][0]!r}")
    api = open(os.path.join(SRC, "docs", "api.md"), encoding="utf-8").read()
    # The job example of GET /jobs/{id}: its loss and parameters, to two decimals.
    sec = api[api.index("### Watch it"):]
    example = doc_json(sec[sec.index("```json") + 7:sec.index("```", sec.index("```json") + 7)])
    if f"{example['metrics']['loss']:.2f}" != f"{base_job['metrics']['loss']:.2f}":
        fail("docs/api.md", f"the job example's loss is {example['metrics']['loss']}; the baseline's "
             f"{base_job['metrics']['loss']:.2f}")
    for name, rows in example["parameters"].items():
        for i, row in enumerate(rows):
            want = round(base_job["parameters"][name][i][0], 2)
            if abs(row[0] - want) > 1e-9:
                fail("docs/api.md", f"the job example's {name}[{i}] is {row[0]}; the baseline's {want}")
    # The predict example: the baseline's model on the row shown.
    m = re.search(r"-d '(\{\"rows\".*?\})'\n# (\{.*?\})", api, re.S)
    status, got = api_call_predict(d, env["DONE_ID"], json.loads(m.group(1)))
    shown = json.loads(m.group(2))["predictions"]
    if status != 200 or [f"{x:.2f}" for x in got["predictions"]] != [f"{x:.2f}" for x in shown]:
        fail("docs/api.md", f"the predict example shows {shown}; the baseline gives {got}")


def check_jobs_trained(d, expected_failures):
    """Every job the examples submitted trains: none of them failed (once each has ended)."""
    _, page = api(d, "GET", "/jobs?limit=10000")
    for j in page["jobs"]:
        if j["id"] in expected_failures:
            continue
        if j["state"] not in ("succeeded", "failed", "cancelled"):
            j = wait_done(d, j["id"], timeout=120)
        if j["state"] == "failed":
            fail("docs", f"the job {j['name'] or j['id']} an example submitted failed: {j['error']}")


def api_call_predict(d, job_id, body):
    return api(d, "POST", f"/jobs/{job_id}/predict", body)


LIVE_SPEC = None


def main():
    for tool in ("curl", "jq", "bash"):
        if not shutil.which(tool):
            print(f"doc_examples: {tool} is missing; the doc examples need it (apt-get install {tool})",
                  file=sys.stderr)
            return 1
    work = tempfile.mkdtemp(prefix="traind-doc-")
    data = os.path.join(work, "traind-sample", "dc-taxi", "csv", "dev")
    t0 = time.time()
    subprocess.run([os.environ["GEN_DCTAXI"], data], check=True, stdout=subprocess.DEVNULL)
    print(f"# sample data in {time.time() - t0:.1f} s", flush=True)
    d = Daemon(os.environ["TRAIND_BIN"], work)
    try:
        env = {"T": d.url, "WORK": work, "TRAIN_URL": f"file://{data}/part*.csv", "ran": set()}
        run_env = {**os.environ, "TRAIND_URL": d.url}
        # The baseline, as the README's quick start runs it: its numbers are the docs'.
        base = subprocess.run([os.path.join(EXAMPLES, "submit-dc-taxi.sh"), env["TRAIN_URL"]], env=run_env,
                              capture_output=True, text=True, check=True).stdout.strip()
        watch = subprocess.run([os.path.join(EXAMPLES, "watch-metrics.sh"), base], env=run_env,
                               capture_output=True, text=True, check=True).stdout
        env["DONE_ID"] = base
        base_job = wait_done(d, base)
        # A job to pause, resume and cancel, and an ended one to delete.
        global LIVE_SPEC
        LIVE_SPEC = {"data": {"train": env["TRAIN_URL"]}, "batch_size": 64, "iterations": 1000000000,
                     "optimizer": {"type": "sgd", "lr": 1e-9}, "clip_grad_norm": 0.5, "priority": -1}
        _, gone = api(d, "POST", "/jobs", {"data": {"train": env["TRAIN_URL"]}, "batch_size": 64, "iterations": 1})
        env["DELETE_ID"] = gone["id"]
        env["LIVE_ID"] = None
        wait_done(d, gone["id"])
        check_numbers(d, env, base_job, watch)
        # A loss that is not finite is null in the API; watch-metrics.sh must not print it as 0.
        _, bad = api(d, "POST", "/jobs", {"data": {"train": env["TRAIN_URL"]}, "batch_size": 65536,
                                          "iterations": 50, "optimizer": {"type": "sgd", "lr": 1e6}})
        w = subprocess.run([os.path.join(EXAMPLES, "watch-metrics.sh"), bad["id"]], env=run_env,
                           capture_output=True, text=True)
        if w.returncode == 0 or "MSE: nan" not in w.stdout or "MSE: 0.00" in w.stdout:
            fail("clients/curl-examples/watch-metrics.sh", f"a diverged job's last lines: {w.stdout[-200:]!r}")
        for doc in DOCS:
            bl = blocks(os.path.join(SRC, doc))
            for i, (lang, text, line, section) in enumerate(bl):
                if lang != "sh":
                    continue
                nxt = bl[i + 1] if i + 1 < len(bl) else None
                following = None
                if nxt and nxt[0] == "json" and nxt[3] == section:
                    try:
                        following = doc_json(nxt[1])
                    except ValueError as e:
                        fail(f"{doc}:{nxt[2]}", f"the JSON shown does not parse: {e}")
                control = re.search(r"/(pause|resume|cancel)\b", text.replace("pause-resume.sh", ""))
                if control:   # a job that has not ended, for this block only
                    _, live = api(d, "POST", "/jobs", LIVE_SPEC)
                    env["LIVE_ID"] = live["id"]
                    wait_state(d, env["LIVE_ID"], ("running",))
                t0 = time.time()
                run_block(f"{doc}:{line}", text, following, env, bool(control))
                print(f"# {doc}:{line} in {time.time() - t0:.1f} s", flush=True)
                if control:
                    api(d, "POST", f"/jobs/{env['LIVE_ID']}/cancel")
        check_jobs_trained(d, {bad["id"]})
        scripts = {f for f in os.listdir(EXAMPLES) if f.endswith(".sh") and f != "common.sh"}
        for s in sorted(scripts - env["ran"]):
            fail("clients/curl-examples", f"{s} is run by no example in {', '.join(DOCS)}")
    finally:
        d.stop()
    if failures:
        print(f"{len(failures)} failure(s); the daemon's log: {d.log.name}", file=sys.stderr)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(work + ".state", ignore_errors=True)
    print("ok: every example in " + ", ".join(DOCS) + " and clients/curl-examples holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
