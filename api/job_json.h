/* job_json.h — a job as the API shows it: the objects of GET /jobs and GET /jobs/{id}. */
#ifndef TRAIND_API_JOB_JSON_H
#define TRAIND_API_JOB_JSON_H

#include <jansson.h>

#include "job.h"

/*
 * The job object of the API (GET /jobs/{id}); with_detail adds the spec and the final
 * parameters, which the list leaves out. NULL when out of memory.
 */
json_t *api_job_json(const struct job *j, int with_detail);

#endif
