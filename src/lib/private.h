/*
 * private.h: internals of libgpuckpt.  Not for use outside src/lib.
 */
#ifndef GCK_PRIVATE_H
#define GCK_PRIVATE_H

#ifndef GCK_BUILDING_LIB
#error "private.h is internal to libgpuckpt"
#endif

#include <stdarg.h>

#include "gpuckpt.h"

#define GCK_ERRMAX	1024
#define GCK_TAR_RECORD	10240		/* tar blocking of the writer */

/*
 * Whether an entry's digest differs from the one recorded for it.  The
 * fuzzing build (make fuzz) takes any digest, so that the fuzzer's
 * mutated entries are parsed on rather than all refused at their first
 * part; no other build defines FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION.
 */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define GCK_DIGEST_DIFFERS(a, b)	((void)(a), (void)(b), 0)
#else
#define GCK_DIGEST_DIFFERS(a, b)	((a) != (b))
#endif

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
int	gck_tempname(struct gck_ctx *, const char *, char **);
int	gck_workdir_name(struct gck_ctx *, const char *, char **);
int	gck_workdir_make(struct gck_ctx *, char **);
void	gck_rmtree(const char *);
int	gck_read_small_file(const char *, char *, size_t);
void	gck_hex64(uint64_t, char [17]);
int	gck_msleep(int);
int64_t	gck_now_ms(void);
int	gck_grow(struct gck_ctx *, void *, size_t *, size_t, size_t);

/* proc.c: a process tree as seen in /proc */
struct gck_proc {
	pid_t		 pid, ppid, pgid, sid;
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
	uint64_t	 vm_size, vm_rss, rss_anon, rss_file, rss_shmem;
};

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

/* keeper.c: the process criu restores under */
struct gck_keeper;
struct gck_guard;
struct gck_keeper_report {
	int	err;		/* the keeper could not run criu: errno */
	int	status;		/* criu's wait status */
};
int	gck_keeper_hook(char *[]);
int	gck_keeper_start(struct gck_ctx *, char *const [], int, int,
	    struct gck_keeper **);
pid_t	gck_keeper_pid(const struct gck_keeper *);
int	gck_keeper_report(struct gck_keeper *, int,
	    struct gck_keeper_report *);
void	gck_keeper_release(struct gck_keeper *);
void	gck_keeper_free(struct gck_keeper *);

/* criu.c */
int	gck_criu_version(struct gck_ctx *, char *, size_t);
int	gck_criu_can_dump(struct gck_ctx *, pid_t);
int	gck_criu_can_restore(struct gck_ctx *, const char *);
struct gck_capture;
struct gck_serve;
/* criu as it runs: our child, or a keeper's, which reports on it */
struct gck_criu_run {
	pid_t			 pid;
	struct gck_keeper	*keeper;
};
int	gck_criu_ended(struct gck_criu_run *, int *);
unsigned int	gck_criu_opt_bit(const char *);
int	gck_criu_dump(struct gck_ctx *, pid_t, const char *, int,
	    unsigned int, int, struct gck_capture *, int (*)(void *), void *);
int	gck_criu_restore(struct gck_ctx *, const char *, int, unsigned int,
	    struct gck_serve *, struct gck_reader *, struct gck_guard *,
	    struct gck_keeper **, int *);

/* guard.c: resumes (or settles) the tree should gpuckpt be killed */
struct gck_guard;
int	gck_guard_start(struct gck_ctx *, const struct gck_ptree *,
	    const char *, const char *, const struct gck_proc *, size_t,
	    struct gck_guard **);
void	gck_guard_intent(struct gck_guard *, char);
void	gck_guard_tree(struct gck_guard *, pid_t);
int	gck_guard_fd(const struct gck_guard *);
pid_t	gck_guard_pid(const struct gck_guard *);
void	gck_guard_free(struct gck_guard *);

/* frame.c: the framed exchange between gpusend and gpurecv */
#define GCK_PROTO		1
#define GCK_FRAME_HDR		16
#define GCK_CHUNK		(1u << 20)	/* image bytes per data frame */
#define GCK_FRAME_MAX		GCK_CHUNK
#define GCK_CTL_MAX		(64u << 10)	/* largest control frame */
#define GCK_KEEPALIVE_MS	5000		/* a busy gpurecv says so */
enum {
	GCK_F_HELLO = 'H',	/* recv: who it is, what it holds */
	GCK_F_JOIN = 'J',	/* send: this connection is stream N */
	GCK_F_START = 'O',	/* send: the image follows, from offset */
	GCK_F_DATA = 'D',	/* send: image bytes, numbered */
	GCK_F_END = 'E',	/* send: no more, and how much in all */
	GCK_F_READY = 'R',	/* recv: restored, stopped, verified */
	GCK_F_GO = 'G',		/* send: let it run */
	GCK_F_RUNNING = 'K',	/* recv: it runs */
	GCK_F_BYE = 'B',	/* send: done, forget it */
	GCK_F_STORED = 'S',	/* recv: stored, verified, renamed */
	GCK_F_ERROR = 'X',	/* recv: failed, and why */
	GCK_F_ABORT = 'A',	/* send: given up */
	GCK_F_KEEPALIVE = 'P'	/* recv: still at work */
};
struct gck_frame {
	int		 type;
	uint32_t	 len;
	uint64_t	 seq;
};
void	gck_frame_pack(unsigned char *, int, uint32_t, uint64_t);
int	gck_frame_unpack(struct gck_ctx *, const unsigned char *,
	    struct gck_frame *, const char *);
unsigned char *gck_frame_vjson(int, uint64_t, size_t *, const char *,
	    va_list);
struct json_t;
struct json_t *gck_frame_parse(struct gck_ctx *, const char *, size_t,
	    const char *);
int	gck_fd_read_wait(struct gck_ctx *, int, void *, size_t, int, int,
	    size_t *);
int	gck_prefix_digest(struct gck_ctx *, int, uint64_t, char [33]);
/* recv.c: gpurecv's run directory, made private if need be */
int	gck_rundir(struct gck_ctx *, char *, size_t);

/*
 * checkpoint.c, restore.c: the hand-over hooks of gpusend.
 *
 * A commit hook runs once the image is complete and flushed, before the
 * tree is disposed of.  It returns GCK_OK to go on with *after (which
 * it may change), or a code (its message set on ctx) to roll the tree
 * back.  It may tell the guard what to do should this process die
 * while it waits.
 */
typedef int	(*gck_commit_fn)(struct gck_ctx *, void *, struct gck_guard *,
		    enum gck_after *);
int	gck_checkpoint_ex(struct gck_ctx *, const struct gck_ckpt_opts *,
	    gck_commit_fn, void *, struct gck_ckpt_result *);
/*
 * A ready hook runs once every restored process is there, stopped,
 * before any of them runs.  GCK_OK lets the tree continue; a code (its
 * message set on ctx) has it killed.
 */
typedef int	(*gck_ready_fn)(struct gck_ctx *, void *, pid_t);
int	gck_restore_ex(struct gck_ctx *, const struct gck_restore_opts *,
	    gck_ready_fn, void *, pid_t *);
int	gck_restore_not_init(struct gck_ctx *);

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
void	gck_zin_keep_raw(struct gck_zin *);
int	gck_zin_spool(struct gck_zin *, int);
void	gck_zin_nospool(struct gck_zin *);
void	gck_zin_free(struct gck_zin *);

/* cuda.c: the CUDA driver and NVML, loaded at run time */
#define GCK_CUDA_CKPT_VERSION	12080	/* checkpoint API: r570, CUDA 12.8 */
#define GCK_CUDA_REMAP_VERSION	13000	/* GPU remapping: r580, CUDA 13.0 */
#define GCK_GPUS_MAX		64

struct gck_cuda;

struct gck_gpu {
	int		 index;		/* driver ordinal on its host */
	unsigned char	 uuid[16];
	char		 uuidstr[48];	/* GPU-xxxxxxxx-... */
	char		 name[128];
	int		 cc_major, cc_minor;
	uint64_t	 total;
	int64_t		 free;		/* -1: unknown */
	char		 pci[32];
};

/* CUprocessState, for the code that does not include cuda.h */
#define GCK_CUDA_RUNNING	0
#define GCK_CUDA_LOCKED		1
#define GCK_CUDA_CHECKPOINTED	2

enum gck_cstep {
	GCK_CS_LOCK,
	GCK_CS_CHECKPOINT,
	GCK_CS_RESTORE,
	GCK_CS_UNLOCK
};

/* A CUDA process and where the steps left it. */
struct gck_cproc {
	pid_t		 pid;
	char		 comm[64];
	int		 state;		/* CUprocessState last seen */
	uint64_t	 gpus;		/* bit g: uses GPU g of the list */
	int64_t		 mem[GCK_GPUS_MAX];	/* bytes on GPU g */
	int		 gpu_memory_known;
	unsigned char	 pairs[GCK_GPUS_MAX][2][16];	/* for restore */
	unsigned int	 npairs;
	enum gck_cstep	 step;		/* last step taken */
	int		 cuerr;		/* its CUresult */
	int		 failed;
	int		 getstate;	/* the state could not be read */
};

int	gck_cuda_open(struct gck_ctx *, struct gck_cuda **);
int	gck_cuda_init(struct gck_ctx *, struct gck_cuda *);
void	gck_cuda_close(struct gck_cuda *);
int	gck_cuda_version(const struct gck_cuda *);
const char *gck_cuda_release(const struct gck_cuda *);
int	gck_cuda_has_nvml(const struct gck_cuda *);
void	gck_cuda_version_string(int, char *, size_t);
const char *gck_cuda_errname(const struct gck_cuda *, int);
const char *gck_cuda_state_name(int);
int	gck_cuda_parse_uuid(const char *, unsigned char [16]);
int	gck_cuda_probe(pid_t);
int	gck_cuda_find(struct gck_ctx *, struct gck_cuda *,
	    const struct gck_proc *, size_t, struct gck_cproc **, size_t *);
int	gck_cuda_devices(struct gck_ctx *, struct gck_cuda *, int,
	    struct gck_gpu **, size_t *);
void	gck_cuda_usage(struct gck_cuda *, const struct gck_gpu *, size_t,
	    struct gck_cproc *, size_t);
int	gck_cuda_step(struct gck_ctx *, struct gck_cuda *, struct gck_cproc *,
	    size_t, enum gck_cstep, unsigned int);
size_t	gck_cuda_settle(struct gck_cuda *, struct gck_cproc *, size_t, char *,
	    size_t);
int	gck_cuda_prepare(struct gck_ctx *, const char *, pid_t,
	    const struct gck_proc *, size_t, struct gck_cuda **);
int	gck_cuda_all_running(struct gck_ctx *, const char *,
	    const struct gck_cproc *, size_t);
int	gck_cuda_candidates(struct gck_ctx *, const struct gck_ptree *,
	    struct gck_proc **, size_t *);

/* The GPU section of a manifest, as parsed. */
struct gck_mcproc {
	pid_t		 pid;
	const char	*comm;
	uint64_t	 gpus;		/* bit g: uses gpus[g] */
	int64_t		 mem[GCK_GPUS_MAX];	/* -1: unknown */
};

struct gck_mcuda {
	int		 driver_version;
	struct gck_gpu	 gpus[GCK_GPUS_MAX];
	size_t		 ngpus;
	struct gck_mcproc *procs;
	size_t		 nprocs;
};

/* What the manifest records of the GPUs at checkpoint time. */
struct gck_cuda_facts {
	int			 driver_version;
	const char		*cuda_version;	/* "13.0" */
	const char		*release;	/* NVML's, or NULL */
	int			 nvml;
	const struct gck_gpu	*gpus;
	size_t			 ngpus;
	const struct gck_cproc	*procs;
	size_t			 nprocs;
};

/* gpumap.c: where an image's GPUs go */
int	gck_gpumap_plan(struct gck_ctx *, const struct gck_mcuda *,
	    const struct gck_gpu *, size_t, const char *, int *, int *);
int	gck_gpumap_host(struct gck_ctx *, const struct gck_gpu *, size_t,
	    const char *, unsigned char [][2][16], unsigned int *);

/* manifest.c */
struct gck_imgfile {
	const char	*name;
	uint64_t	 size;
	int		 memory;	/* a process's pages: streamed last */
};

char	*gck_manifest_build(struct gck_ctx *, const struct gck_ptree *,
	    const struct gck_ckpt_opts *, enum gck_after, const char *, int,
	    const struct gck_cuda_facts *, const struct gck_imgfile *, size_t);
enum gck_after gck_manifest_after(const struct gck_manifest *);
int	gck_manifest_has_file(const struct gck_manifest *, const char *);
size_t	gck_manifest_nfiles(const struct gck_manifest *);
int64_t	gck_manifest_file_pos(const struct gck_manifest *, const char *);
int	gck_manifest_has_file_list(const struct gck_manifest *);
int64_t	gck_manifest_file_size(const struct gck_manifest *, const char *);
int	gck_manifest_file_memory(const struct gck_manifest *, const char *);
int	gck_manifest_this_boot(const struct gck_manifest *);
struct json_t *gck_manifest_json(const struct gck_manifest *);
void	gck_boot_id(char *, size_t);

/* image.c: what the streamers need of the reader and writer */
int	gck_criu_name_ok(const char *);
int	gck_reader_file(struct gck_reader *, char *, size_t, uint64_t *);
ssize_t	gck_reader_file_read(struct gck_reader *, void *, size_t);
ssize_t	gck_reader_file_chunk(struct gck_reader *, const void **, size_t,
	    int *);
int	gck_reader_file_seen(struct gck_reader *, const char *);
void	gck_reader_keep_raw(struct gck_reader *);
int	gck_reader_spool(struct gck_reader *, int);
void	gck_reader_nospool(struct gck_reader *);
int	gck_writer_add_pages(struct gck_writer *, const char *, const void *,
	    size_t);
void	gck_writer_stats(const struct gck_writer *, uint64_t *, uint64_t *);

/* streamer.c: criu --stream's image streamer socket */
#define GCK_SNAME	128
#define GCK_KEEP_MAX	(1024u << 20)	/* image data held in memory */
#define GCK_SAMPLE_STRIDE (64u << 10)	/* pages checked: the first ... */
#define GCK_SAMPLE_LEN	(4u << 10)	/* ... 4 KiB of every 64 KiB */

/* A file CRIU wrote. */
struct gck_sfile {
	char		 name[GCK_SNAME];
	int		 fd;		/* from criu; -1 once read */
	int		 pages;		/* a task's memory: not kept */
	pid_t		 pid;		/* pages: whose */
	char		*data;		/* kept: its bytes */
	size_t		 len, cap;
	uint64_t	 size;		/* bytes criu wrote */
	uint64_t	*digests;	/* pages: of each part's samples */
	size_t		 ndigests, capdigests;
	uint64_t	 partfill;
	struct XXH3_state_s *xs;
};

struct gck_capture;
struct gck_serve;

int	gck_capture_open(struct gck_ctx *, const char *, const char *,
	    size_t, struct gck_capture **);
int	gck_capture_run(struct gck_capture *, struct gck_criu_run *);
int	gck_capture_hooked(const struct gck_capture *);
void	gck_capture_answer(struct gck_capture *, int);
const char *gck_capture_hook_path(const struct gck_capture *);
size_t	gck_capture_nfiles(const struct gck_capture *);
const struct gck_sfile *gck_capture_file(const struct gck_capture *, size_t);
const struct gck_sfile *gck_capture_find(const struct gck_capture *,
	    const char *);
int	gck_capture_replace(struct gck_capture *, const char *, char *,
	    size_t);
void	gck_capture_free(struct gck_capture *);
uint64_t gck_sample_digest(const char *, size_t);
int	gck_serve_open(struct gck_ctx *, const char *,
	    const struct gck_manifest *, struct gck_serve **);
int	gck_serve_preload(struct gck_serve *, struct gck_reader *);
int	gck_serve_run(struct gck_serve *, struct gck_reader *,
	    struct gck_criu_run *);
void	gck_serve_free(struct gck_serve *);

/* ttynull.c: the terminals of a tree, in its image, become /dev/null */
int	gck_ttys_to_null(struct gck_ctx *, struct gck_capture *, size_t *);

/* pagemap.c: a task's memory, as its pagemap image lists it */
#define GCK_IMG_COMMON_MAGIC	0x54564319u	/* CRIU's image header */
const uint8_t *gck_img_record(const char *, size_t, size_t *, uint32_t *,
	    int *);
struct gck_pmread;

int	gck_pmread_open(struct gck_ctx *, const struct gck_sfile *,
	    const struct gck_sfile *, struct gck_pmread **);
ssize_t	gck_pmread_read(struct gck_pmread *, void *, size_t);
int	gck_pmread_error(const struct gck_pmread *);
int	gck_pmread_overlaps(const struct gck_pmread *, uint64_t, uint64_t,
	    uint64_t, uint64_t);

struct gck_area {
	uint64_t	addr, size;
};

int	gck_rseq_areas(struct gck_ctx *, const struct gck_capture *, pid_t,
	    struct gck_area **, size_t *);
void	gck_pmread_free(struct gck_pmread *);
const struct gck_mcuda *gck_manifest_cuda(const struct gck_manifest *);

/*
 * ssh.c: an SSH client connection with one exec channel.  Each
 * connection is used by one thread at a time; connections are
 * independent of each other.  After a failure, a connection is good only
 * for gck_ssh_exit_status(), gck_ssh_stderr() and gck_ssh_close().
 */
struct gck_ssh;
struct gck_ssh_opts {
	const char	*host;		/* name or address */
	const char	*user;		/* NULL: the local user's name */
	int		 port;		/* 0: 22 */
	const char	*identity;	/* -i: a private key file, or NULL */
	const char	*known_hosts;	/* NULL: ~/.ssh/known_hosts */
	const char	*agent;		/* NULL: $SSH_AUTH_SOCK; "none": none */
	int		 accept_new;	/* add an unknown host's key */
	unsigned int	 timeout_ms;	/* connect timeout, and the longest any
					   later read or write may wait with
					   no progress (0: no limit) */
};

/*
 * Connects, checks the host key against known_hosts and logs in with a
 * public key (ssh-agent, then opts->identity or the usual key files).
 * Returns GCK_OK with *sp set, or GCK_ESSH, GCK_ETIMEDOUT, GCK_EINTR...
 */
int	 gck_ssh_connect(struct gck_ctx *, const struct gck_ssh_opts *,
	    struct gck_ssh **);
/* Runs command on a new session channel.  Returns GCK_OK or a code. */
int	 gck_ssh_exec(struct gck_ctx *, struct gck_ssh *, const char *);
/* Writes all of buf to the command's stdin.  Returns GCK_OK or a code. */
int	 gck_ssh_write(struct gck_ctx *, struct gck_ssh *, const void *,
	    size_t);
/* Reads its stdout: returns >0 bytes, 0 at EOF, or a negative code. */
ssize_t	 gck_ssh_read(struct gck_ctx *, struct gck_ssh *, void *, size_t);
/* Reads exactly len bytes; GCK_ETRUNC at an early EOF. */
int	 gck_ssh_read_full(struct gck_ctx *, struct gck_ssh *, void *,
	    size_t);
/*
 * Returns 1 if gck_ssh_read() would return at once (stdout data waiting,
 * its EOF or a failure), else 0; never blocks.
 */
int	 gck_ssh_pending(struct gck_ssh *);
/* Closes the command's stdin.  Returns GCK_OK or a code. */
int	 gck_ssh_send_eof(struct gck_ctx *, struct gck_ssh *);
/*
 * Returns the command's exit status (128 + N when killed by signal N),
 * waiting up to wait_ms for the remote to close the channel, or -1 if
 * it is not known by then.
 */
int	 gck_ssh_exit_status(struct gck_ssh *, int);
/* The last non-empty line the command wrote on stderr, "" if none. */
const char *gck_ssh_stderr(const struct gck_ssh *);
/* "user@host[:port]", as the messages name the connection. */
const char *gck_ssh_name(const struct gck_ssh *);
/* Disconnects and frees; NULL is fine. */
void	 gck_ssh_close(struct gck_ssh *);

#endif /* GCK_PRIVATE_H */
