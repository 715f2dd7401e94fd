#ifndef GCK_GPU_CUDA_H
#define GCK_GPU_CUDA_H

struct gck_ctx;
struct gck_pinpool;
struct gck_cuda;
struct gck_proc;
struct gck_ptree;

/* cuda.c: the CUDA driver and NVML, loaded at run time */
#define GCK_CUDA_CKPT_VERSION	12080	/* checkpoint API: r570, CUDA 12.8 */
#define GCK_CUDA_REMAP_VERSION	13000	/* GPU remapping: r580, CUDA 13.0 */
#define GCK_CUDA_STORAGE_VERSION 13040	/* custom storage: CUDA 13.4 */
#define GCK_CUDA_JOB_VERSION	13010	/* job files: r590, CUDA 13.1 */
#define GCK_CUDA_IPC_RELEASE	610	/* CUDA IPC in a job: r610 */
#define GCK_GPUS_MAX		64
/* custom storage's segments of device memory (gck_cuda_segment()) */
#define GCK_SEG_MIN		(16u << 20)	/* bytes, at least */
#define GCK_SEG_GPU		2048		/* a GPU's, at most */

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
	int		 minor;		/* of /dev/nvidiaN, NVML's; -1 */
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
	/* Custom storage: its device memory went (goes) that way. */
	int		 custom;
	int		 refused;	/* the driver's CUresult, or 0 */
	unsigned int	 ndev;		/* the GPUs the driver described */
	uint64_t	 devsize[GCK_GPUS_MAX];	/* their bytes */
	int		 syserr;	/* its spool: errno, or 0 */
	int		 srcfail;	/* its memory's source failed (1), or
					   did not fit the GPU (-1, -2) */
	unsigned int	 faildev;	/* the GPU that failed */
	void		*inmap;		/* its GPUs, mapped for a restore */
};

/*
 * Where a restore through custom storage takes the device memory of
 * process p from: the next piece of that of its GPU dev (as the driver
 * described it), at most len bytes into buf, each checked before it is
 * given.  Returns the bytes, 0 at the end of that GPU's, or -1 with the
 * error set on ctx.
 */
struct gck_ctx;
typedef ssize_t (*gck_cuda_src_fn)(void *, struct gck_ctx *,
    const struct gck_cproc *, unsigned int, void *, size_t);

/*
 * Where a checkpoint through custom storage puts each GPU's memory of a
 * process, and a rollback finds it again: a file a GPU, path
 * (gck_cuda_spool_path()).  create(arg, path, pid, GPU, size) starts
 * one and put() adds the next bytes to it, commit() ends it whole;
 * open(arg, path) finds one again, its size in *sizep, and get() reads
 * it on (the bytes, 0 at its end, -1 with errno); drop() lets go of
 * either (a file created but not committed is removed).  Each other
 * returns 0 or an errno value, create() and open() with a handle.
 * NULL as a whole: the memory as it is (gck_cuda_store_out()).
 */
struct gck_cuda_spool {
	int	 (*create)(void *, const char *, pid_t, unsigned int, uint64_t,
		    void **);
	int	 (*put)(void *, const void *, size_t);
	int	 (*commit)(void *);
	int	 (*open)(void *, const char *, uint64_t *, void **);
	ssize_t	 (*get)(void *, void *, size_t);
	void	 (*drop)(void *);
	void	*arg;
};

const char *gck_nvml_path(void);
int	gck_cuda_open(struct gck_ctx *, struct gck_cuda **);
int	gck_cuda_init(struct gck_ctx *, struct gck_cuda *);
void	gck_cuda_close(struct gck_cuda *);
int	gck_cuda_version(const struct gck_cuda *);
const char *gck_cuda_release(const struct gck_cuda *);
int	gck_cuda_has_nvml(const struct gck_cuda *);
void	gck_cuda_set_serial(struct gck_cuda *, int);
int	gck_cuda_storage(const struct gck_cuda *);
int	gck_cuda_store_out(struct gck_ctx *, struct gck_cuda *, const char *,
	    const struct gck_cuda_spool *);
int	gck_cuda_store_in(struct gck_ctx *, struct gck_cuda *,
	    struct gck_cproc *, gck_cuda_src_fn, void *);
int	gck_cuda_map_in(struct gck_ctx *, struct gck_cuda *,
	    struct gck_cproc *, size_t);
int	gck_cuda_store_write(struct gck_cuda *, const struct gck_cproc *,
	    unsigned int, uint64_t, const void *, size_t);
int	gck_cuda_end_in(struct gck_ctx *, struct gck_cuda *,
	    struct gck_cproc *, size_t, int);
struct gck_pinpool *gck_cuda_pinpool_new(struct gck_cuda *, size_t, size_t);
void	*gck_cuda_pinpool_get(struct gck_pinpool *, size_t);
int	 gck_cuda_pinpool_owns(const struct gck_pinpool *, const void *);
int	 gck_cuda_pinpool_put(struct gck_pinpool *, void *);
void	 gck_cuda_pinpool_free(struct gck_pinpool *);
void	gck_cuda_spool_learn(struct gck_cuda *, struct gck_cproc *, size_t,
	    const char *, const struct gck_cuda_spool *);
int	gck_cuda_spool_path(const char *, pid_t, unsigned int, char *,
	    size_t);
void	gck_cuda_dev_file(char *, size_t, pid_t, unsigned int);
uint64_t gck_cuda_segment(uint64_t);
uint64_t gck_cuda_nsegs(uint64_t, uint64_t);
uint64_t gck_cuda_seg_size(uint64_t, uint64_t, uint64_t);
void	gck_cuda_seg_file(char *, size_t, pid_t, unsigned int, uint64_t,
	    uint64_t);
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
void	gck_cuda_bring_back(struct gck_ctx *, const struct gck_proc *, size_t,
	    const char *, const struct gck_cuda_spool *);
int	gck_cuda_candidates(struct gck_ctx *, const struct gck_ptree *,
	    struct gck_proc **, size_t *);

/* The GPU section of a manifest, as parsed. */
struct gck_mcproc {
	pid_t		 pid;
	const char	*comm;
	uint64_t	 gpus;		/* bit g: uses gpus[g] */
	int64_t		 mem[GCK_GPUS_MAX];	/* -1: unknown */
	int		 custom;	/* its device memory in files: */
	unsigned int	 ndev;		/* one a GPU the driver described */
	uint64_t	 devsize[GCK_GPUS_MAX];
	uint64_t	 devchunk[GCK_GPUS_MAX];	/* each part's bytes
						   but the last, or 0 */
	uint64_t	 devseg[GCK_GPUS_MAX];	/* each file's bytes but
						   the last, or 0: one file */
};

struct gck_mcuda {
	int		 driver_version;
	struct gck_gpu	 gpus[GCK_GPUS_MAX];
	size_t		 ngpus;
	struct gck_mcproc *procs;
	size_t		 nprocs;
	pid_t		 job_holder;	/* of a job: its file's holder */
	int		 job_fd;	/* and descriptor (holder 0: none) */
	size_t		 nccl_ranks;	/* NCCL ranks quiesced */
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
	pid_t			 job_holder;	/* a job's file: fd job_fd */
	int			 job_fd;	/* of this process, or 0 */
	size_t			 nccl_ranks;	/* quiesced (gpu/nccl.c) */
};

#endif /* GCK_GPU_CUDA_H */
