/* init_job.c — init.from naming a job: checked at submit, its latest checkpoint opened at start. */
#include "init_job.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

int init_from_check(const struct job_registry *reg, const struct job_spec *s, struct spec_error *se)
{
    if (!spec_init_from_job(s))
        return 0;
    const struct job *src = job_registry_find(reg, s->init_from);
    const char *why = NULL;
    if (!src)
        why = "no job has this id";
    else if (job_latest_checkpoint(src, NULL, NULL) < 0)
        why = job_is_terminal(job_state(src)) ? "that job has no checkpoint (it never saved one)"
                                              : "that job has no checkpoint yet; submit again once it "
                                                "has one (see its \"checkpoint\")";
    if (!why)
        return 0;
    snprintf(se->field, sizeof se->field, "init.from");
    snprintf(se->message, sizeof se->message, "job %s: %s", s->init_from, why);
    return -1;
}

int init_from_open(const struct job_registry *reg, const struct job_spec *s, int *fd, struct err *e)
{
    *fd = -1;
    if (!spec_init_from_job(s))
        return 0;
    const struct job *src = job_registry_find(reg, s->init_from);
    const char *path = NULL;
    if (!src)
        return err_set(e, ERR_INVALID_ARG, "init.from: job %s no longer exists", s->init_from);
    if (job_latest_checkpoint(src, NULL, &path) < 0)
        return err_set(e, ERR_INVALID_ARG, "init.from: job %s has no checkpoint", s->init_from);
    if ((*fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return err_set(e, ERR_INVALID_ARG, "init.from: the checkpoint of job %s is no longer on disk (%s)",
                       s->init_from, strerror(errno));
    return 0;
}
