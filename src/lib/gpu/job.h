#ifndef GCK_GPU_JOB_H
#define GCK_GPU_JOB_H

#include <sys/types.h>

#include <stddef.h>

#define GCK_JOB_NAME	"cuda-checkpoint-job"	/* the memfd's */

struct gck_ctx;

int	gck_job_new(struct gck_ctx *, int *, char *, size_t);
int	gck_job_of(pid_t, char *, size_t);

#endif /* GCK_GPU_JOB_H */
