/*
 * private.h: internals of libgpuckpt.  Not for use outside src/lib.
 */
#ifndef GCK_PRIVATE_H
#define GCK_PRIVATE_H

#ifndef GCK_BUILDING_LIB
#error "private.h is internal to libgpuckpt"
#endif

#include "gpuckpt.h"

#define GCK_ERRMAX	1024
#define GCK_TAR_RECORD	10240		/* tar blocking of the writer */

struct gck_ctx {
	int			 code;
	int			 oerrno;
	char			 msg[GCK_ERRMAX];
	void			(*logfn)(void *, int, const char *);
	void			*logarg;
	int			 loglevel;
	volatile sig_atomic_t	*intr;
};

/* error.c */
int	gck_set_error(struct gck_ctx *, int, const char *, ...)
	    __attribute__((__format__(__printf__, 3, 4)));
int	gck_set_syserr(struct gck_ctx *, int, const char *, ...)
	    __attribute__((__format__(__printf__, 3, 4)));
void	gck_log(struct gck_ctx *, int, const char *, ...)
	    __attribute__((__format__(__printf__, 3, 4)));
int	gck_interrupted(struct gck_ctx *);
int	gck_check_interrupt(struct gck_ctx *);
const char *gck_signame(int);

/* util.c */
int	gck_write_all(struct gck_ctx *, int, const void *, size_t,
	    const char *);
ssize_t	gck_read_full(struct gck_ctx *, int, void *, size_t, const char *);
int	gck_mkworkdir(struct gck_ctx *, const char *, char **);
void	gck_rmtree(const char *);
int	gck_read_small_file(const char *, char *, size_t);
void	gck_hex64(uint64_t, char [17]);
int	gck_msleep(int);

/* proc.c: a process tree as seen in /proc */
struct gck_proc {
	pid_t		 pid, ppid, pgid, sid;
	uid_t		 uid;
	gid_t		 gid;
	int		 tty_nr;
	int		 threads;
	char		 state;
	char		 comm[64];
	char		*cwd;
	char		**argv;
	int		 argc;
	uint64_t	 vm_size, vm_rss, rss_anon, rss_file, rss_shmem;
};

struct gck_ptree {
	struct gck_proc	*procs;		/* procs[0] is the root */
	size_t		 n;
};

int	gck_ptree_scan(struct gck_ctx *, pid_t, struct gck_ptree **);
void	gck_ptree_free(struct gck_ptree *);
void	gck_pids_signal(const pid_t *, size_t, int);
int	gck_pids_wait_dead(const pid_t *, size_t, int);
char	gck_pid_state(pid_t);
int	gck_pid_comm(pid_t, char *, size_t);
int	gck_pid_tty_fd(pid_t, char *, size_t);

/* criu.c */
int	gck_criu_version(struct gck_ctx *, const char *, char *, size_t);
int	gck_criu_dump(struct gck_ctx *, pid_t, const char *, const char *,
	    int);
int	gck_criu_restore(struct gck_ctx *, const char *, const char *, int,
	    pid_t *);

/* guard.c: resumes (or settles) the tree should gpuckpt be killed */
struct gck_guard;
int	gck_guard_start(struct gck_ctx *, pid_t, const char *, const char *,
	    struct gck_guard **);
void	gck_guard_intent(struct gck_guard *, char);
void	gck_guard_free(struct gck_guard *);

/* zio.c: the compression layer under the tar layer */
struct gck_zout;
struct gck_zin;
int	gck_zout_new(struct gck_ctx *, int, int, struct gck_zout **);
int	gck_zout_write(struct gck_zout *, const void *, size_t);
int	gck_zout_finish(struct gck_zout *);
void	gck_zout_free(struct gck_zout *);
int	gck_zin_new(struct gck_ctx *, int, struct gck_zin **);
ssize_t	gck_zin_read(struct gck_zin *, void *, size_t);
int	gck_zin_compressed(const struct gck_zin *);
uint64_t gck_zin_total(const struct gck_zin *);
uint64_t gck_zin_zero_tail(const struct gck_zin *);
int	gck_zin_eof(const struct gck_zin *);
int	gck_zin_zero_range(const struct gck_zin *, uint64_t, uint64_t);
int	gck_zin_peek(const struct gck_zin *, uint64_t, void *, size_t);
void	gck_zin_free(struct gck_zin *);

/* manifest.c */
char	*gck_manifest_build(struct gck_ctx *, const struct gck_ptree *,
	    const struct gck_ckpt_opts *, const char *, int);

#endif /* GCK_PRIVATE_H */
