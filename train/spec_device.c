/* spec_device.c — the job spec's "device": a name or a list of them, parsed and written back. */
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_impl.h"

/*
 * "auto", "cpu" or "cuda:N" (N a decimal 0 .. SPEC_MAX_CUDA_INDEX, no sign, no leading
 * zeros); field names v in errors. In a list, "auto" makes no sense and is refused.
 */
static int parse_device_name(const char *v, const char *field, bool in_list, int *device,
                             int *index, struct spec_error *se)
{
    if (strcmp(v, "cpu") == 0 || (!in_list && strcmp(v, "auto") == 0)) {
        *device = v[0] == 'c' ? SPEC_DEVICE_CPU : SPEC_DEVICE_AUTO;
        return 0;
    }
    if (strcmp(v, "auto") == 0)
        return spec_fail(se, "", field, "\"auto\" cannot be part of a list: a list names the devices "
                         "the job may use (\"cpu\", \"cuda:N\")");
    if (strncmp(v, "cuda:", 5) != 0)
        return spec_fail(se, "", field, "\"%s\" is not one of the accepted values (%s\"cpu\" or \"cuda:N\")",
                         v, in_list ? "" : "\"auto\", ");
    const char *n = v + 5;
    size_t len = strlen(n);
    bool digits = len > 0 && len <= 2 && !(len == 2 && n[0] == '0');
    for (size_t i = 0; digits && i < len; i++)
        digits = n[i] >= '0' && n[i] <= '9';
    if (!digits || atoi(n) > SPEC_MAX_CUDA_INDEX)
        return spec_fail(se, "", field, "\"%s\" is not a GPU: write \"cuda:N\" with N from 0 to %d",
                         v, SPEC_MAX_CUDA_INDEX);
    *device = SPEC_DEVICE_CUDA;
    *index = atoi(n);
    return 0;
}

/* ["cuda:1", "cpu"]: the job may run on any of them, tried in this order. */
static int parse_device_list(const json_t *list, struct job_spec *s, struct spec_error *se)
{
    size_t n = json_array_size(list);
    if (n == 0)
        return spec_fail(se, "", "device", "an empty list names no device: give at least one, or \"auto\"");
    if (n > SPEC_MAX_DEVICES)
        return spec_fail(se, "", "device", "a list names each device once: at most %d", SPEC_MAX_DEVICES);
    for (size_t i = 0; i < n; i++) {
        char field[32];
        snprintf(field, sizeof field, "device[%zu]", i);
        const json_t *v = json_array_get(list, i);
        if (!json_is_string(v))
            return spec_fail(se, "", field, "must be a string such as \"cuda:0\" or \"cpu\", not %s",
                             spec_type_name(v));
        struct spec_device_ref *d = &s->devices[i];
        int kind = 0;
        d->index = 0;
        if (parse_device_name(json_string_value(v), field, true, &kind, &d->index, se))
            return -1;
        d->kind = (enum spec_device)kind;
        for (size_t k = 0; k < i; k++)
            if (s->devices[k].kind == d->kind && s->devices[k].index == d->index)
                return spec_fail(se, "", field, "\"%s\" is already in the list (device[%zu])",
                                 json_string_value(v), k);
    }
    s->n_devices = (int)n;
    return 0;
}

/* A device name, or a list of them (s->devices). */
int spec_parse_device(const json_t *root, struct job_spec *s, int *device, struct spec_error *se)
{
    const json_t *dev = json_object_get(root, "device");
    if (json_is_array(dev)) {
        *device = SPEC_DEVICE_LIST;
        return parse_device_list(dev, s, se);
    }
    const char *v = NULL;
    if (spec_get_string(root, "", "device", false, &v, se))
        return -1;
    return v ? parse_device_name(v, "device", false, device, &s->device_index, se) : 0;
}

static void device_ref_name(const struct spec_device_ref *d, char *buf, size_t cap)
{
    if (d->kind == SPEC_DEVICE_CUDA)
        snprintf(buf, cap, "cuda:%d", d->index);
    else
        snprintf(buf, cap, "%s", d->kind == SPEC_DEVICE_CPU ? "cpu" : "auto");
}

void spec_device_name(const struct job_spec *s, char *buf, size_t cap)
{
    if (s->device != SPEC_DEVICE_LIST) {
        device_ref_name(&(struct spec_device_ref){s->device, s->device_index}, buf, cap);
        return;
    }
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->n_devices && len + 1 < cap; i++) {
        char one[16];
        device_ref_name(&s->devices[i], one, sizeof one);
        int n = snprintf(buf + len, cap - len, "%s%s", i ? "," : "", one);
        len = n < 0 ? cap : len + (size_t)n;
    }
}

/* "cuda:1", or the list as given: ["cuda:1", "cpu"]. */
json_t *spec_device_json(const struct job_spec *s)
{
    char name[16];
    if (s->device != SPEC_DEVICE_LIST) {
        spec_device_name(s, name, sizeof name);
        return json_string(name);
    }
    json_t *list = json_array();
    for (int i = 0; list && i < s->n_devices; i++) {
        device_ref_name(&s->devices[i], name, sizeof name);
        json_array_append_new(list, json_string(name));
    }
    return list;
}
