#ifndef GCK_CORE_KEEPER_H
#define GCK_CORE_KEEPER_H

#include <sys/types.h>

struct gck_ctx;
struct gck_guard;
struct gck_keeper;

/* keeper.c: the process criu restores under */
struct gck_keeper;
struct gck_guard;
struct gck_keeper_report {
	int	err;		/* the keeper could not run criu: errno */
	int	status;		/* criu's wait status */
};
/* A PID namespace to restore in: the image's highest PID, its root. */
struct gck_keeper_ns {
	pid_t	maxpid;
	pid_t	root;
};
int	gck_keeper_start(struct gck_ctx *, char *const [], int, int,
	    const int *, size_t, const struct gck_keeper_ns *,
	    struct gck_keeper **);
pid_t	gck_keeper_pid(const struct gck_keeper *);
int	gck_keeper_report(struct gck_keeper *, int,
	    struct gck_keeper_report *);
void	gck_keeper_release(struct gck_keeper *);
int	gck_keeper_root_status(struct gck_keeper *, int, int *);
void	gck_keeper_free(struct gck_keeper *);

#endif /* GCK_CORE_KEEPER_H */
