/*
 * gpuckpt.h: the gpuckpt engine library.
 *
 * The library never prints and never exits.  Every entry point that can
 * fail returns GCK_OK (0) or a negative GCK_* code, and leaves a one-line
 * message on the context, readable with gck_error_string().
 */
#ifndef GPUCKPT_H
#define GPUCKPT_H

#include <sys/types.h>

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define GCK_FORMAT_VERSION	3		/* image format written */
#define GCK_CHUNK_SIZE		(1u << 20)	/* memory chunk, format 2 */
#define GCK_PART_SIZE		(16u << 20)	/* default part size */
#define GCK_ZSTD_LEVEL		3		/* default zstd level */
#define GCK_PART_MAX		(64u << 20)	/* largest part a reader takes */
#define GCK_META_MAX		(16u << 20)	/* largest manifest / trailer */
#define GCK_ENTRIES_MAX		1000000		/* most entries in one image */

#define GCK_OK		  0
#define GCK_ESYS	(-1)	/* a system call failed, see gck_errno() */
#define GCK_EFORMAT	(-2)	/* the stream is not a valid image */
#define GCK_EVERSION	(-3)	/* the image is newer than this reader */
#define GCK_ETRUNC	(-4)	/* the stream ended early */
#define GCK_EUNSAFE	(-5)	/* an entry the reader refuses to use */
#define GCK_ECRIU	(-6)	/* criu failed */
#define GCK_EINTR	(-7)	/* interrupted by a signal */
#define GCK_ENOPROC	(-8)	/* no such process */
#define GCK_EBUSY	(-9)	/* a PID needed for restore is in use */
#define GCK_EINVAL	(-10)	/* invalid argument */
#define GCK_ENOMEM	(-11)	/* out of memory */
#define GCK_ECORRUPT	(-12)	/* a checksum does not match */
#define GCK_ECUDA	(-13)	/* the CUDA driver is missing or failed */
#define GCK_ESSH	(-14)	/* ssh connection, host key or login failed */
#define GCK_ETIMEDOUT	(-15)	/* the peer made no progress in time */
#define GCK_EREMOTE	(-16)	/* the remote gpurecv failed */
#define GCK_EDOUBT	(-17)	/* a hand-over whose outcome is not known */
#define GCK_ESIGN	(-18)	/* the image's signature is missing, not
				   allowed, or does not match */

/* The allowed signers of images on this host, when the file exists. */
#define GCK_ALLOWED_SIGNERS_FILE "/etc/gpuckpt/allowed_signers"

#define GCK_LOCK_TIMEOUT_MS	10000	/* default wait for a GPU lock */
#define GCK_SEND_TIMEOUT_MS	60000	/* default silence gpusend, gpurecv bear */

struct gck_ctx;
struct gck_writer;
struct gck_reader;
struct gck_manifest;

/*
 * What happens to the tree once its image is complete.  By default, as
 * the output asks: after a regular file or a block device, killed (the
 * image is stored); after the null device, resumed (nothing could
 * restore it); after a pipe, a socket or another device, handed over:
 * left stopped until whoever restores the image ends it.
 */
enum gck_after {
	GCK_AFTER_DEFAULT = 0,	/* as the output asks */
	GCK_AFTER_KILL,		/* killed (a move) */
	GCK_AFTER_RUN,		/* resumed (a snapshot) */
	GCK_AFTER_STOP,		/* left stopped */
	GCK_AFTER_HANDOVER	/* left stopped for its restore to end */
};

/*
 * The criu(8) options a process tree may need, named as criu names them
 * (gck_criu_opt_name()).  An image records those it was dumped with, and
 * its restore passes them to criu restore as well.
 */
#define GCK_CRIU_TCP_ESTABLISHED 0x1u	/* --tcp-established */
#define GCK_CRIU_EXT_UNIX_SK	0x2u	/* --ext-unix-sk */
#define GCK_CRIU_FILE_LOCKS	0x4u	/* --file-locks */
#define GCK_CRIU_TCP_CLOSE	0x8u	/* --tcp-close: connections dumped
					   and restored closed */
#define GCK_CRIU_OPTS_ALL	0xfu

/* criu's own ghost limit, the default of gck_ckpt_opts.ghost_limit. */
#define GCK_GHOST_LIMIT		(UINT64_C(1) << 20)

struct gck_ckpt_opts {
	pid_t		 pid;		/* root of the tree */
	int		 level;		/* zstd level, 0 for no compression */
	enum gck_after	 after;
	size_t		 part_size;	/* 0 for GCK_PART_SIZE */
	const char	*output;	/* path, or NULL to write to outfd */
	int		 outfd;		/* used when output is NULL */
	const char	*tmpdir;	/* staging area, NULL for $TMPDIR */
	unsigned int	 lock_ms;	/* GPU lock timeout, 0 for none */
	unsigned int	 nccl_ms;	/* NCCL quiesce timeout, 0: 30 s */
	const char	*cut_dir;	/* one cut across hosts, met in this
					   shared directory, or NULL */
	unsigned int	 cut_size;	/* its hosts, 2 or more */
	const char	*cut_name;	/* this one's, NULL: the hostname */
	unsigned int	 criu_opts;	/* GCK_CRIU_* */
	uint64_t	 ghost_limit;	/* the largest deleted file the tree
					   holds open that may travel in the
					   image (criu --ghost-limit); 0 for
					   GCK_GHOST_LIMIT */
	int		 format;	/* image format, 0 for the newest */
	int		 threads;	/* compressing, 0 for one per CPU */
	int		 gpu_staging;	/* device memory through the
					   processes' host memory even where
					   the driver has custom storage */
	const char	*parent;	/* image whose chunks are referred
					   to, not stored again, or NULL */
	const struct gck_parents *have;	/* (gpusend) the chunks the
					   receiver's cache holds, referred
					   to, not sent */
	struct gck_memo	*memo;		/* (gpusend --live) digests of
					   chunks read in its rounds */
	const char	*sign;		/* the key to sign the image with
					   (a private key file, or the public
					   key file of a key ssh-agent
					   holds), or NULL */
};

/* Where a tree is restored: gck_restore_opts.pidns. */
enum gck_pidns {
	GCK_PIDNS_AUTO = 0,	/* here, or in a PID namespace of its own
				   when a PID of the image is taken */
	GCK_PIDNS_ALWAYS	/* in a PID namespace of its own */
};

struct gck_waiter;		/* a restored tree, stayed with */
struct gck_parents;		/* where the chunks an image refers to are */

struct gck_restore_opts {
	int		 infd;		/* the stream */
	const char	*inname;	/* its name, for messages, or NULL */
	const char	*tmpdir;	/* staging area, NULL for $TMPDIR */
	int		 pid_wait_ms;	/* how long to wait for busy PIDs */
	const char	*gpu_map;	/* "SRC=DST,...", or NULL */
	enum gck_pidns	 pidns;
	int		 threads;	/* decompressing, 0 for one per CPU */
	char *const	*parents;	/* where the images an incremental
					   image refers to are: files or
					   directories */
	size_t		 nparents;
	struct gck_waiter **waiter;	/* non-NULL: the tree stays ours,
					   for gck_wait() */
	struct gck_parents *pool;	/* (gpurecv) the images of its cache,
					   which the image may refer to */
	const char	*allowed_signers;	/* the image must be signed by
					   a key this file allows; NULL:
					   GCK_ALLOWED_SIGNERS_FILE if it
					   exists, else no signature needed */
	struct gck_stats *stats;	/* non-NULL: filled in on success */
	int		 tcp_close;	/* the image's TCP connections are
					   restored closed (criu --tcp-close),
					   not as they were */
	const char	*root;		/* a tree of a mount namespace of its
					   own: its root file system here, or
					   NULL for the image's */
	char *const	*mount_map;	/* "AT=SOURCE": where the mount it had
					   from its host at AT comes from */
	size_t		 nmount_map;
};

struct gck_image_stats {
	uint64_t	 entries;	/* entries read, trailer included */
	uint64_t	 bytes;		/* bytes of entry data */
	uint64_t	 stream_bytes;	/* bytes of tar stream, decompressed */
	int		 compressed;	/* 1 when the stream was zstd */
	uint64_t	 ref_bytes;	/* of bytes, those read from parents */
};

/*
 * Context: carries the last error, the log sink and the interrupt flag.
 * gck_ctx_new() returns NULL only when out of memory.
 */
struct gck_ctx	*gck_ctx_new(void);
void		 gck_ctx_free(struct gck_ctx *);

/* Returns the message of the last failure on ctx, or NULL. */
const char	*gck_error_string(const struct gck_ctx *);
/*
 * Returns what the last success must be told with (one line, such as
 * that a tree was restored in a PID namespace of its own), or NULL.
 */
const char	*gck_notice_string(const struct gck_ctx *);
/* Returns the GCK_* code of the last failure on ctx, GCK_OK if none. */
int		 gck_error_code(const struct gck_ctx *);
/* Returns the errno behind the last GCK_ESYS failure, or 0. */
int		 gck_errno(const struct gck_ctx *);

/* Log sink: level 1 is progress, 2 and more is debug. */
void		 gck_set_log(struct gck_ctx *,
		    void (*)(void *, int, const char *), void *, int);
/*
 * The caller's signal flag: when it becomes non-zero (the signal number),
 * long operations stop at the next safe point and return GCK_EINTR.
 */
void		 gck_set_interrupt(struct gck_ctx *,
		    volatile sig_atomic_t *);

/*
 * Progress: while an image is written, read or sent, fn(arg, p) is
 * called with the bytes of the stage so far, at most every
 * GCK_PROGRESS_MS, on whichever thread moves them.  p->total is 0 when
 * the stage's size is not known.  A NULL fn turns it off (the default).
 */
#define GCK_PROGRESS_MS		100
struct gck_progress {
	const char	*stage;		/* "dumping", "writing", "reading",
					   "restoring", "sending" */
	uint64_t	 bytes;		/* image bytes of the stage so far */
	uint64_t	 total;		/* of it in all, or 0 */
};
void		 gck_ctx_set_progress(struct gck_ctx *,
		    void (*)(void *, const struct gck_progress *), void *);

/*
 * What a checkpoint, restore or send did, its times in milliseconds on
 * the monotonic clock.  Each field says which of them fills it in.
 */
#define GCK_STAGES_MAX		8
struct gck_stats {
	uint64_t	 memory_bytes;	/* memory pages: read from the tree
					   (checkpoint, send), or the
					   image's to restore (restore) */
	uint64_t	 image_bytes;	/* the image: written (checkpoint,
					   send) or read (restore) */
	uint64_t	 sent_bytes;	/* (send) of it, sent */
	uint64_t	 unchanged_bytes;	/* of memory_bytes, referred
					   to in a parent or cache, not
					   stored */
	uint64_t	 zero_bytes;	/* (checkpoint, send) of
					   memory_bytes, zero pages left out */
	uint64_t	 freeze_ms;	/* (checkpoint, send) the tree
					   stopped; (restore) restoring it */
	uint64_t	 total_ms;	/* the whole call */
	struct {
		const char	*name;
		uint64_t	 ms;
	}		 stages[GCK_STAGES_MAX];	/* in order */
	size_t		 nstages;
};

/*
 * Returns the name of the GCK_CRIU_* option bit, as criu spells its long
 * option ("file-locks"), or NULL for none or several bits.
 */
const char	*gck_criu_opt_name(unsigned int);

/* Returns the version string of the library, e.g. "0.1.0". */
const char	*gck_version(void);

/* What became of a tree once its image was complete. */
struct gck_ckpt_result {
	enum gck_after	 after;		/* never GCK_AFTER_DEFAULT */
	pid_t		*pids;		/* its processes, root first */
	size_t		 npids;
	size_t		 ncuda;		/* of them, CUDA processes */
	const char	*output;	/* "a pipe", "a socket", "a device" */
	pid_t		 reader;	/* a pipe's reader on this host, or -1 */
	char		 reader_comm[64];
	pid_t		 tty_pid;	/* a process whose output went to */
	int		 tty_fd;	/* a terminal, -1 if none; restored, */
	char		 tty[64];	/* it goes to /dev/null */
	uint64_t	 ref_bytes;	/* of memory, referred to: stored in
					   the parent or the receiver's
					   cache */
	struct gck_stats stats;
};

/*
 * Checkpoints the tree rooted at opts->pid into an image.  On any failure
 * before the image is complete the tree is left as it was (running, or
 * stopped where it was stopped) and no output file is left behind.  On
 * success *res (if not NULL) says what became of the tree; free it with
 * gck_ckpt_result_free().  Returns GCK_OK or a GCK_* code.
 */
int		 gck_checkpoint(struct gck_ctx *, const struct gck_ckpt_opts *,
		    struct gck_ckpt_result *);
void		 gck_ckpt_result_free(struct gck_ckpt_result *);

/*
 * Restores the image read from opts->infd; every entry is verified before
 * any process runs.  On success *rootp is the restored root PID, running
 * in a session of its own.  Returns GCK_OK or a GCK_* code; on failure no
 * process is left behind.
 */
int		 gck_restore(struct gck_ctx *, const struct gck_restore_opts *,
		    pid_t *);

/*
 * Stays with a tree restored with opts->waiter until its root ends,
 * sending it each signal of fwd that comes to us (the caller blocks
 * them, or has its interrupt handler catch them: those are sent too).
 * On GCK_OK *statusp is the root's wait status.  gck_waiter_free()
 * then forgets the tree (NULL is fine).
 */
int		 gck_wait(struct gck_ctx *, struct gck_waiter *,
		    const sigset_t *, int *);
void		 gck_waiter_free(struct gck_waiter *);

/*
 * Suspends the CUDA processes of the tree rooted at pid in place: their
 * device memory moves into their host memory (or, where the driver has
 * custom storage and staging is 0, into files of ours in $TMPDIR) and
 * their GPUs are freed, while they keep running on the CPU (their CUDA
 * calls wait).  On failure every process is brought back to where it
 * was.  *np is the number of processes suspended.
 */
int		 gck_suspend(struct gck_ctx *, pid_t, unsigned int, int,
		    size_t *);

/*
 * Brings the suspended CUDA processes of the tree rooted at pid back
 * onto GPUs, remapped by map ("SRC=DST,...", this host's GPUs by UUID
 * or index) or onto the GPUs they had.  *np is the number resumed.
 */
int		 gck_resume(struct gck_ctx *, pid_t, const char *, size_t *);

/*
 * Returns 1 when process pid has exited: it is gone, or a zombie that
 * its parent has yet to reap (as a batch job's shell, between its
 * command's exit and its wait); 0 while it lives, or when /proc does not
 * say.
 */
int		 gck_pid_gone(pid_t);

/*
 * The programs of $(libexecdir)/gpuckpt, each a main() over one call.
 * gck_dump_hook() is gpuckpt-hook, the action script criu runs during
 * the dump of gck_checkpoint(): it asks the checkpoint whether criu is
 * to go on.  Returns GCK_OK when it is, GCK_ECRIU when not (the answer
 * was no, or never came), GCK_EINVAL when criu did not run this process
 * for gck_checkpoint() (no GCK_CRIU_HOOK or CRTOOLS_SCRIPT_ACTION).
 */
int		 gck_dump_hook(void);

/*
 * gpuckpt-keeper, the process gck_restore() runs criu (argv) under:
 * its report goes out on descriptor 3, the word to go comes in on 4,
 * and 5 is the guard's.  Returns GCK_OK once let go, or GCK_ESYS when
 * it could not run criu (and reported so).
 */
int		 gck_keeper_run(char *const []);

/*
 * Image writer.  gck_writer_new() starts an image on fd with zstd at
 * level (0: uncompressed).  Entries are added in order; gck_writer_finish()
 * adds the trailer and flushes.  All return GCK_OK or a GCK_* code.
 */
int		 gck_writer_new(struct gck_ctx *, int, int, size_t,
		    struct gck_writer **);
int		 gck_writer_add(struct gck_writer *, const char *,
		    const void *, size_t);
int		 gck_writer_add_file(struct gck_writer *, const char *, int);
int		 gck_writer_finish(struct gck_writer *);
void		 gck_writer_free(struct gck_writer *);

/*
 * Image reader.  gck_reader_head() reads and checks the manifest, the
 * first entry, and returns it parsed; it and the JSON text that
 * gck_reader_manifest_text() returns stay valid until the reader is freed.
 * gck_reader_extract() reads every other entry, verifies each against its
 * digest, writes the CRIU files (reassembled from their parts) under
 * dirfd (-1: verify only) and checks the trailer and the end of the
 * stream.  Both return GCK_OK or a GCK_* code.
 */
int		 gck_reader_new(struct gck_ctx *, int, struct gck_reader **);
int		 gck_reader_head(struct gck_reader *,
		    const struct gck_manifest **);
void		 gck_reader_manifest_text(const struct gck_reader *,
		    const char **, size_t *);
int		 gck_reader_extract(struct gck_reader *, int);
void		 gck_reader_stats(const struct gck_reader *,
		    struct gck_image_stats *);
/*
 * After gck_reader_head(): where the parents of an incremental image
 * are, n image files or directories of them.  Returns GCK_OK, or a code
 * when one of the chain is not found or not the image it should be.
 */
int		 gck_reader_use_parents(struct gck_reader *, char *const *,
		    size_t);
/*
 * After gck_reader_extract(): who signed the image.  With allowed (an
 * allowed_signers file of OpenSSH's), the signature must be good and by
 * a key it allows now; without, good, by whatever key.  On GCK_OK,
 * *whop ("alice, ED25519 key SHA256:...", or the key alone) is to be
 * freed; NULL for an image not signed, which is GCK_ESIGN with allowed.
 */
int		 gck_reader_signer(struct gck_reader *, const char *, char **);
void		 gck_reader_free(struct gck_reader *);

/*
 * Inspection.  Each describes what it found as a JSON document (text,
 * NUL-terminated, ending in a newline, freed by the caller) of schema
 * GCK_INSPECT_SCHEMA, as gpuinspect(1) documents it.
 * gck_inspect_show() reads the head of the image on fd: its manifest,
 * and the CRIU images up to the memory, for what the processes have
 * open; gck_inspect_show_opts() with GCK_SHOW_ENV also gives each
 * process's environment.  gck_inspect_check() says what a restore of the
 * image on fd would miss on this host, and sets *fail when it would
 * fail.  gck_inspect_diff() reads and verifies two images whole, a
 * then b (labelled la and lb in the document), and sets *differ when
 * they differ.  gck_inspect_extract() writes the manifest and the CRIU
 * files of the image into dir, which is created, or must be empty; a
 * failure leaves dir as it was.  All return GCK_OK or a GCK_* code.
 */
#define GCK_INSPECT_SCHEMA	2
#define GCK_SHOW_ENV		0x1
int		 gck_inspect_show(struct gck_ctx *, int, char **);
int		 gck_inspect_show_opts(struct gck_ctx *, int, unsigned int,
		    char **);
int		 gck_inspect_check(struct gck_ctx *, int, char **, int *);
int		 gck_inspect_diff(struct gck_ctx *, int, const char *, int,
		    const char *, char **, int *);
int		 gck_inspect_extract(struct gck_ctx *, int, const char *);
/*
 * Writes the incremental image on fd, its chunks read from its parents
 * (paths, n files or directories), to a new file path as an image that
 * needs none: the same id, no parent.  Returns GCK_OK or a code; on
 * failure no file is left.
 */
int		 gck_inspect_flatten(struct gck_ctx *, int, char *const *,
		    size_t, const char *);

/*
 * Manifest.  gck_manifest_parse() checks the JSON text against format v1
 * and returns GCK_EVERSION for a newer format.  Accessors never fail.
 */
int		 gck_manifest_parse(struct gck_ctx *, const char *, size_t,
		    struct gck_manifest **);
int		 gck_manifest_format(const struct gck_manifest *);
pid_t		 gck_manifest_root_pid(const struct gck_manifest *);
size_t		 gck_manifest_nprocs(const struct gck_manifest *);
pid_t		 gck_manifest_pid(const struct gck_manifest *, size_t);
const char	*gck_manifest_comm(const struct gck_manifest *, size_t);
int		 gck_manifest_zombie(const struct gck_manifest *, size_t);
/* The process's start time on the source host, 0 if not recorded. */
uint64_t	 gck_manifest_start(const struct gck_manifest *, size_t);
int		 gck_manifest_shell_job(const struct gck_manifest *);
/* The GCK_CRIU_* options the image was dumped with. */
unsigned int	 gck_manifest_criu_opts(const struct gck_manifest *);
const char	*gck_manifest_criu_version(const struct gck_manifest *);
size_t		 gck_manifest_cuda_nprocs(const struct gck_manifest *);
void		 gck_manifest_free(struct gck_manifest *);

/*
 * The receiving end of gpusend (gpurecv): reads the framed exchange on
 * infd and answers on outfd.  GCK_RECV_RESTORE restores the image and
 * lets it run on the sender's word; GCK_RECV_STORE stores it at path
 * (a directory takes name), verified, under a temporary name until
 * whole; GCK_RECV_JOIN relays an extra connection of hand-over id to
 * its gpurecv; GCK_RECV_OUTCOME writes what became of hand-over id.
 * A failure is also sent to the sender.  Returns GCK_OK or a code.
 */
#define GCK_STREAMS_MAX		16
enum gck_recv_mode {
	GCK_RECV_RESTORE = 1,
	GCK_RECV_STORE,
	GCK_RECV_JOIN,
	GCK_RECV_OUTCOME,
	GCK_RECV_CACHE		/* into the cache only: gpusend --live */
};
struct gck_recv_opts {
	enum gck_recv_mode	 mode;
	int			 infd, outfd;
	const char		*id;		/* the hand-over's id */
	unsigned int		 streams;	/* connections in all */
	const char		*path;		/* store: where */
	const char		*name;		/* store: the name in a dir */
	int			 resume;	/* store: keep what came before */
	const char		*gpu_map;	/* restore: as gpurestore's */
	const char		*root;		/* restore: as gpurestore's */
	char *const		*mount_map;	/* restore: as gpurestore's */
	size_t			 nmount_map;
	const char		*tmpdir;
	unsigned int		 timeout_ms;	/* for the sender's word */
	const char		*cache;		/* restore: the cache directory;
						   NULL: $GCK_CACHE or the
						   default; "": none */
	uint64_t		 cache_size;	/* its limit; 0: the default */
	const char		*allowed_signers;	/* restore: as
						   gck_restore_opts' */
	int			 tcp_close;	/* restore: as
						   gck_restore_opts' */
	int			 pages;		/* offer its chunks'
						   pages too */
};
struct gck_recv_result {
	pid_t			 pid;		/* restored root */
	char			*stored;	/* stored image, to be freed */
	uint64_t		 bytes;		/* image bytes in all */
	uint64_t		 offset;	/* of them, kept from before */
};
int		 gck_recv(struct gck_ctx *, const struct gck_recv_opts *,
		    struct gck_recv_result *);

/*
 * The sending end (gpusend): connects to host over ssh, starts gpurecv
 * there (remote_path) and sends it an image: the live tree pid,
 * checkpointed as it goes and killed only once the remote runs it (a
 * failure before resumes it), or the image read from infd, to be
 * restored there or, with path, stored.  On success res->pid is the
 * remote root (restores) and res->stored the stored path (to be freed).
 * GCK_EDOUBT: the connection was lost once the remote had been told to
 * run the tree, and nobody could tell whether it did; the tree is left
 * stopped.
 */
struct gck_send_opts {
	const char	*host;
	const char	*user;		/* NULL: the local user */
	int		 port;		/* 0: 22 */
	const char	*identity;	/* a private key file, or NULL */
	const char	*known_hosts;	/* NULL: ~/.ssh/known_hosts */
	const char	*agent;		/* NULL: $SSH_AUTH_SOCK; "none" */
	int		 accept_new;	/* learn an unknown host's key */
	unsigned int	 timeout_ms;	/* connect; silence from the remote */
	const char	*remote_path;	/* the remote command, e.g. gpurecv */
	unsigned int	 parallel;	/* connections, 1 to GCK_STREAMS_MAX */
	int		 verbose;	/* the remote says what it does */

	pid_t		 pid;		/* a live tree, or 0 */
	int		 level;		/* its image's zstd level */
	unsigned int	 lock_ms;	/* its GPU lock timeout */
	unsigned int	 criu_opts;	/* its GCK_CRIU_* options */
	uint64_t	 ghost_limit;	/* as gck_ckpt_opts' */
	const char	*tmpdir;

	int		 infd;		/* or an image */
	const char	*name;		/* its file name, or NULL */
	const char	*path;		/* store it there; NULL: restore */
	int		 resume;	/* skip what the remote holds of it */
	const char	*gpu_map;	/* restore: as gpurestore's */
	const char	*root;		/* restore: gpurestore --root there */
	char *const	*mount_map;	/* restore: gpurestore -M there */
	size_t		 nmount_map;
	int		 tcp_close;	/* restore: its TCP connections
					   closed there (gpurecv --tcp-close) */
	const char	*cache;		/* restore: the remote's cache
					   directory, "" for none; NULL:
					   its default */
	uint64_t	 cache_size;	/* its limit; 0: its default */
	int		 live;		/* a live tree: pre-copy rounds */
	unsigned int	 max_rounds;	/* at most; 0: GCK_ROUNDS_MAX */
	uint64_t	 bwlimit;	/* bytes a second; 0: no limit */
	const char	*sign;		/* a live tree: the key to sign its
					   image with, as gck_ckpt_opts' */
};
#define GCK_ROUNDS_MAX		8	/* pre-copy rounds, by default */
struct gck_send_result {
	pid_t		 pid;		/* the remote root, or -1 */
	char		*stored;	/* where the remote stored it */
	uint64_t	 bytes;		/* of the image, in all */
	uint64_t	 skipped;	/* of them, held there already */
	uint64_t	 cached;	/* bytes of memory its cache had */
	uint64_t	 stopped_ms;	/* a live tree: stopped that long */
	int		 retried;	/* sent twice: see gck_send() */
	unsigned int	 rounds;	/* --live: pre-copy rounds made */
	uint64_t	 round_bytes;	/* of the image bytes, in them */
	uint64_t	 round_memory;	/* memory they sent, uncompressed */
	uint64_t	 last_changed;	/* memory the last round sent */
	const char	*why;		/* why the rounds ended, or NULL */
	int		 in_doubt;
	pid_t		 tty_pid;	/* as gck_ckpt_result's, for -p */
	int		 tty_fd;
	char		 tty[64];
	struct gck_stats stats;		/* a live tree: its checkpoint's;
					   sent_bytes, total_ms always */
};
int		 gck_send(struct gck_ctx *, const struct gck_send_opts *,
		    struct gck_send_result *);

/*
 * Snapshot series (gpuckpt --series, gpuckpt(1)): the images of one
 * running tree, taken over time into one directory, each named by a
 * sequence number and the UTC time it began (000012-20261128T213000Z.gck),
 * and listed, once complete, by the index GCK_SERIES_INDEX, oldest first.
 */
#define GCK_SERIES_INDEX	"index.json"
#define GCK_SERIES_KEEP		5	/* snapshots kept, by default */
#define GCK_SERIES_FULL_EVERY	10	/* images in a chain, at most */

struct gck_series;

/* A snapshot, as the index lists it. */
struct gck_snapshot {
	char		*name;		/* its file's name in the directory */
	char		*path;		/* the directory's path, then name */
	char		 id[33];	/* the image's id */
	char		*parent;	/* the name of its parent, or NULL */
	char		 time[32];	/* when it began: 2026-11-28T21:30:00Z */
	uint64_t	 size;		/* of its file, in bytes */
	int		 full;		/* 1: it has no parent */
	unsigned int	 seq;		/* its sequence number */
};

struct gck_series_opts {
	unsigned int	 keep;		/* the newest kept; 0: all */
	unsigned int	 full_every;	/* a full image once the newest's
					   chain holds that many; 1: each */
};

/*
 * Opens the series in directory dir.  To write (write non-zero), dir is
 * made if missing, its lock is taken (GCK_EBUSY, naming the process that
 * holds it, when another has it), and what a run cut short left there is
 * removed; the lock is held until gck_series_free().  To read, dir must
 * have an index (GCK_EINVAL if not).  Returns GCK_OK with *sp, or a code.
 */
int		 gck_series_open(struct gck_ctx *, const char *, int,
		    struct gck_series **);
void		 gck_series_free(struct gck_series *);
/* The snapshots listed, and snapshot i of them, oldest first (NULL past). */
size_t		 gck_series_count(const struct gck_series *);
const struct gck_snapshot *gck_series_get(const struct gck_series *,
		    size_t);
const char	*gck_series_dir(const struct gck_series *);
/*
 * Asks the process that writes the series in dir, and holds its lock
 * (gpuckpt --series --every), for a snapshot now: it takes one at once,
 * or once the one under way is done.  Waits until a snapshot begun after
 * the request is listed, up to timeout_s seconds (0: no limit).  Returns
 * GCK_OK with *namep (to free) its name; GCK_ENOPROC when nothing writes
 * the series or the writer ended first, GCK_ETIMEDOUT, or the error of
 * the snapshot that failed.
 */
int		 gck_series_request(struct gck_ctx *, const char *,
		    unsigned int, char **);
/*
 * Takes a snapshot of the tree of opts->pid, left running, into a series
 * opened to write: incremental over the newest snapshot, or full when
 * there is none, when its chain holds so->full_every images, or when it
 * is not sound; then lists it in the index and keeps the newest so->keep
 * snapshots and the images their chains need, removing the others.
 * opts->output, ->parent and ->after are the series'.  On GCK_OK, *snp
 * is the new snapshot (valid until the next call) and *res as
 * gck_checkpoint()'s; on failure the index and the tree are as they
 * were, and the snapshot's file is not left.
 */
int		 gck_series_snapshot(struct gck_ctx *, struct gck_series *,
		    const struct gck_ckpt_opts *, const struct gck_series_opts *,
		    struct gck_ckpt_result *, const struct gck_snapshot **);
/*
 * Whether snapshot i is sound as far as can be seen without reading it
 * whole: its file there, of the size listed, its footer, trailer and
 * manifest readable and its id the one listed, and so for each image of
 * its chain.  gck_series_verify() reads it whole as well, its chain's
 * chunks too.  Both return GCK_OK, or a code with why not.
 */
int		 gck_series_check(struct gck_ctx *, const struct gck_series *,
		    size_t);
int		 gck_series_verify(struct gck_ctx *, const struct gck_series *,
		    size_t);
/*
 * Restores the newest sound snapshot of the series, as gck_restore()
 * with opts (its infd and inname unused; the series' directory is
 * searched for parents after opts->parents).  A snapshot that is not
 * sound, or whose restore fails as its image is damaged (GCK_EFORMAT,
 * GCK_ETRUNC, GCK_ECORRUPT, found before any process runs), is passed
 * over, and skip, if not NULL, is told of it and why; the next older is
 * tried.  On GCK_OK *snp is the snapshot restored; GCK_EINVAL when none
 * could be; another code when a restore failed otherwise.
 */
int		 gck_series_restore(struct gck_ctx *, const struct gck_series *,
		    const struct gck_restore_opts *,
		    void (*)(void *, const struct gck_snapshot *, const char *),
		    void *, pid_t *, const struct gck_snapshot **);
/*
 * Describes the series as a JSON document (text, freed by the caller):
 * each snapshot as listed, with "chain" (images in its chain), "ok" and,
 * if not, "problem"; "newest", the newest sound one or null; "damaged",
 * how many are not.  Sound as gck_series_check() says, or with verify
 * gck_series_verify().  Returns GCK_OK or a code.
 */
int		 gck_series_describe(struct gck_ctx *, const struct gck_series *,
		    int, char **);

/*
 * GPU health, from NVML's events (health.c): the GPUs to watch, by NVML
 * index or UUID (none: all), and what to watch for.  A GPU lost, or
 * unavailable, is always watched for.
 */
#define GCK_HEALTH_XID		0x1u	/* Xid critical errors */
#define GCK_HEALTH_DBE		0x2u	/* double-bit ECC errors */
#define GCK_HEALTH_RETIRE	0x4u	/* page retirement, row remapping */
#define GCK_HEALTH_CLOCKS	0x8u	/* clocks slowed down */
#define GCK_HEALTH_DEFAULT	(GCK_HEALTH_XID | GCK_HEALTH_DBE | \
				    GCK_HEALTH_RETIRE)

struct gck_health;

struct gck_health_opts {
	const char *const	*gpus;
	size_t			 ngpus;
	unsigned int		 events;	/* GCK_HEALTH_* */
	const unsigned int	*xids;		/* the Xids watched; none: */
	size_t			 nxids;		/* health.c's table */
	int			 all_xids;	/* every Xid */
};

/* An event the policy names. */
struct gck_health_event {
	char		 uuid[96];	/* of its GPU */
	unsigned int	 index;		/* its GPU's NVML index */
	const char	*kind;		/* xid, dbe, retire, clocks, lost */
	unsigned long long data;	/* the Xid; the clocks reasons */
	int		 fatal;		/* its device memory is lost */
	char		 what[128];	/* "Xid 79: the GPU has fallen..." */
};

/*
 * Opens NVML and registers the GPUs of o for the events o names.
 * Returns GCK_OK with *hp, GCK_ECUDA (no NVML, or no event API, or a
 * GPU that reports none of them) or GCK_EINVAL (no such GPU).
 */
int		 gck_health_open(struct gck_ctx *,
		    const struct gck_health_opts *, struct gck_health **);
/* The GPUs watched, and the UUID of GPU i of them. */
size_t		 gck_health_count(const struct gck_health *);
const char	*gck_health_uuid(const struct gck_health *, size_t);
/*
 * Waits for the next event the policy names, up to timeout_ms (-1: no
 * limit).  Returns GCK_OK with *ev, GCK_ETIMEDOUT, GCK_EINTR (the
 * context's interrupt) or GCK_ECUDA.
 */
int		 gck_health_wait(struct gck_ctx *, struct gck_health *, long,
		    struct gck_health_event *);
void		 gck_health_close(struct gck_health *);

/*
 * A job file (gpuckpt --launch): the driver (r590 or newer) checkpoints
 * the processes whose environment names one as one job.  gck_job_new()
 * makes it for a command this process is about to exec: *fdp, open
 * across exec, and the value of GCK_JOB_ENV (len bytes of val) to set.
 * Returns GCK_OK, or GCK_ECUDA (no driver, or one older than r590).
 */
#define GCK_JOB_ENV	"CUDA_CHECKPOINT_JOB_FILE"
int		 gck_job_new(struct gck_ctx *, int *, char *, size_t);

#endif /* GPUCKPT_H */
