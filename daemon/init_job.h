/*
 * init_job.h — init {"from": "<job id>"} on the daemon's side: the job it names must have a
 * checkpoint when the spec is submitted, and that checkpoint is opened when the job starts, so
 * the training engine (train/init_from.h) loads a file that cannot vanish under it.
 */
#ifndef TRAIND_DAEMON_INIT_JOB_H
#define TRAIND_DAEMON_INIT_JOB_H

#include "err.h"
#include "job.h"
#include "spec.h"

/*
 * Submit time, on the loop thread: a job id must name a job of reg that has a checkpoint
 * now. 0 (also for a URL, checked when the job starts), or -1 with se (field init.from).
 */
int init_from_check(const struct job_registry *reg, const struct job_spec *s, struct spec_error *se);

/*
 * Start time, on the loop thread: opens the latest checkpoint of the job s names, so the
 * file stays readable when that job replaces or deletes it meanwhile. *fd is -1 when s
 * names no job. ERR_INVALID_ARG when the job or its checkpoint is gone.
 */
int init_from_open(const struct job_registry *reg, const struct job_spec *s, int *fd, struct err *e);

#endif
