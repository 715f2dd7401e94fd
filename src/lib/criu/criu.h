#ifndef GCK_CRIU_CRIU_H
#define GCK_CRIU_CRIU_H

struct gck_ctx;
struct gck_guard;
struct gck_keeper;
struct gck_keeper_ns;
struct gck_nsview;

/* criu.c */
int	gck_criu_version(struct gck_ctx *, char *, size_t);
int	gck_criu_can_read(struct gck_ctx *, const char *, char *, size_t);
int	gck_criu_can_dump(struct gck_ctx *, pid_t);
int	gck_criu_can_restore(struct gck_ctx *, const char *);
/* criu as it runs: our child, or a keeper's, which reports on it */
struct gck_criu_run {
	pid_t			 pid;
	struct gck_keeper	*keeper;
};
int	gck_criu_ended(struct gck_criu_run *, int *);
/*
 * What runs while criu does, streaming its images: whoever asked for the
 * dump or the restore says what (criu.c knows nothing of the streamer).
 */
typedef int	(*gck_criu_during_fn)(void *, struct gck_criu_run *);
struct gck_criu_stream {
	gck_criu_during_fn	 during;
	void			*arg;
	const char		*hook;	/* told to criu's action script */
};
/*
 * What criu is run for, and its command line as gck_criu_argv() fills
 * it in.
 */
#define GCK_CRIU_ARGV	32
#define GCK_CRIU_EXTRA	(2 * 200 + 4)	/* a mount namespace's (mntns.c) */
struct gck_criu_cmd {
	int		 restore;	/* criu restore -d, else criu dump */
	const char	*imgdir;
	pid_t		 pid;		/* dump: the tree's root */
	int		 shell_job;	/* --shell-job */
	unsigned int	 opts;		/* GCK_CRIU_* */
	int		 leave_running;	/* else --leave-stopped */
	int		 stream;	/* --stream, else image files */
	const char	*action;	/* --action-script, or NULL */
	int		 nft;		/* dump: --network-lock nftables */
	int		 link_remap;	/* dump: --link-remap */
	uint64_t	 ghost_limit;	/* dump: --ghost-limit, 0: criu's */
	int		 tcp_close;	/* restore: --tcp-close, not
					   --tcp-established */
	char		 pidbuf[16];
	char		 ghostbuf[24];
	char *const	*extra;		/* more options, as they are */
	size_t		 nextra;
	char		*argv[GCK_CRIU_ARGV + GCK_CRIU_EXTRA];
};
int	gck_criu_argv(struct gck_criu_cmd *);
/* What a dump asks of criu beyond the options an image records. */
struct gck_criu_dumpopts {
	int		 shell_job;
	unsigned int	 opts;		/* GCK_CRIU_* */
	int		 leave_running;
	uint64_t	 ghost_limit;	/* 0: criu's own (1 MiB) */
	char *const	*extra;		/* more options: a mount namespace's */
	size_t		 nextra;
	struct gck_guard *guard;	/* told of criu, or NULL */
};
/* What a restore gives criu beyond what the image says. */
#define GCK_CRIU_FIRSTFD	6	/* where criu finds x->fds */
struct gck_criu_extra {
	char *const	*args;		/* more options */
	size_t		 nargs;
	const int	*fds;		/* inherited from 6 on */
	size_t		 nfds;
};
int	gck_criu_dump(struct gck_ctx *, pid_t, const struct gck_nsview *,
	    const char *, const struct gck_criu_dumpopts *,
	    const struct gck_criu_stream *);
int	gck_criu_ns_check(struct gck_ctx *, const struct gck_nsview *,
	    const char *);
int	gck_criu_restore(struct gck_ctx *, const char *, int, unsigned int,
	    int, const struct gck_criu_extra *,
	    const struct gck_criu_stream *, const struct gck_keeper_ns *,
	    struct gck_guard *,
	    struct gck_keeper **, int *);

#endif /* GCK_CRIU_CRIU_H */
