#ifndef GCK_GPU_JOB_H
#define GCK_GPU_JOB_H

#include <sys/types.h>

#include <stddef.h>

#define GCK_JOB_NAME	"cuda-checkpoint-job"	/* the memfd's */

struct gck_ctx;
struct gck_nsview;
struct gck_proc;
struct gck_ptree;

int	gck_job_of(pid_t, char *, size_t);
int	gck_job_setup(struct gck_ctx *, const char *, pid_t,
	    const struct gck_ptree *, const struct gck_proc *, size_t,
	    const struct gck_nsview *, pid_t *, int *);
int	gck_job_name(struct gck_ctx *, pid_t, int);

#endif /* GCK_GPU_JOB_H */
