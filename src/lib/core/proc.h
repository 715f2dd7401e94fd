#ifndef GCK_CORE_PROC_H
#define GCK_CORE_PROC_H

struct gck_ctx;

/* proc.c: a process tree as seen in /proc */
struct gck_proc {
	pid_t		 pid, ppid, pgid, sid;
	pid_t		 host_pid;	/* pid as we see it, once pid is
					   another namespace's (or 0) */
	uid_t		 uid;
	gid_t		 gid;
	int		 tty_nr;
	int		 threads;
	char		 state;
	uint64_t	 start;		/* clock ticks after boot */
	char		 comm[64];
	char		*cwd;
	char		**argv;
	int		 argc;
	char		*env;		/* /proc/PID/environ: NUL-separated */
	size_t		 envlen;	/* (NULL, 0: not readable) */
	int		 envcut;	/* cut at GCK_ENV_MAX bytes */
	uint64_t	 vm_size, vm_rss, rss_anon, rss_file, rss_shmem;
};

#define GCK_ENV_MAX	65536

struct gck_ptree {
	struct gck_proc	*procs;		/* procs[0] is the root */
	size_t		 n;
};

int	gck_ptree_scan(struct gck_ctx *, pid_t, struct gck_ptree **);
void	gck_ptree_free(struct gck_ptree *);
void	gck_pids_signal(const pid_t *, size_t, int);
char	gck_pid_state(pid_t);
int	gck_pid_dying(pid_t);
uint64_t gck_pid_start(pid_t);
pid_t	gck_pid_ppid(pid_t);
pid_t	gck_pid_inner(pid_t);
int	gck_pid_comm(pid_t, char *, size_t);
int	gck_pid_fd_tty(pid_t, int, char *, size_t);
int	gck_pid_ptmx_fd(pid_t);
int	gck_pid_status(pid_t, const char *, char *, size_t);
int	gck_children_stopped(pid_t);
int	gck_ptree_outside_pipe(const struct gck_ptree *, pid_t *, int *,
	    pid_t *);
pid_t	gck_pipe_peer(int);

/* A process known by its PID and its start time (0: any). */
struct gck_pst {
	pid_t		 pid;
	uint64_t	 start;
};
void	gck_psts_signal(const struct gck_pst *, size_t, int);
int	gck_psts_wait_gone(const struct gck_pst *, size_t, int);

/*
 * A PID namespace other than ours, where a tree lives: the PIDs its
 * processes have there, the last field of NSpid in /proc/PID/status,
 * and those they have here.  NULL stands for our own namespace, where
 * the two are the same.
 */
struct gck_pidmap {
	pid_t		 host, ns;
};
struct gck_nsview {
	pid_t			 root;	/* the tree's root, as we see it */
	pid_t			 init;	/* the namespace's pid 1, as we see it */
	size_t			 level;	/* its field of NSpid */
	char			 id[64];	/* "pid:[N]" */
	struct gck_pidmap	*map;	/* the tree, as last learnt */
	size_t			 n;
};
int	gck_nsview_of(struct gck_ctx *, pid_t, struct gck_nsview **);
void	gck_nsview_free(struct gck_nsview *);
pid_t	gck_nsview_local(const struct gck_nsview *, pid_t);
pid_t	gck_nsview_host(const struct gck_nsview *, pid_t);
pid_t	gck_nsview_sid(const struct gck_nsview *, const struct gck_proc *);
int	gck_nsview_learn(struct gck_ctx *, struct gck_nsview *,
	    const struct gck_ptree *);
void	gck_nsview_tree(const struct gck_nsview *, struct gck_ptree *);

#endif /* GCK_CORE_PROC_H */
