#ifndef GCK_GPU_CUDAPRIV_H
#define GCK_GPU_CUDAPRIV_H

/*
 * The driver and NVML as cuda.c loads them, for the files of gpu/ that
 * call them (storage.c).  Needs cuda.h first.
 */
/* NVML, as libnvidia-ml.so.1 defines the few parts used here. */
typedef int			 nvml_ret;
typedef struct nvml_device	*nvml_dev;
struct nvml_memory {
	unsigned long long	 total, free, used;
};
struct nvml_process {
	unsigned int		 pid;
	unsigned long long	 used;
	unsigned int		 gpu_instance, compute_instance;
};
#define NVML_OK			0
#define NVML_NOT_AVAILABLE	(~0ULL)
#define NVML_PROCS_MAX		4096

struct gck_cuda {
	void	*lib, *nvml;
	int	 version;
	int	 inited;
	int	 serial;		/* one process at a time (a job) */
	char	 release[80];		/* from NVML, or "" */
	/*
	 * Custom storage: the directory where a checkpoint's device
	 * memory waits for the image (NULL: none), and where a restore
	 * takes it from instead (src, or NULL: the directory).
	 */
	char	*spool;
	const struct gck_cuda_spool *sops;	/* its files' */
	gck_cuda_src_fn src;
	void	*srcarg;

	CUresult (*Init)(unsigned int);
	CUresult (*DriverGetVersion)(int *);
	CUresult (*GetErrorName)(CUresult, const char **);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetName)(char *, int, CUdevice);
	CUresult (*DeviceGetUuid)(CUuuid *, CUdevice);
	CUresult (*DeviceTotalMem)(size_t *, CUdevice);
	CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
	CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
	CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*PrimaryCtxRelease)(CUdevice);
	CUresult (*CtxPushCurrent)(CUcontext);
	CUresult (*CtxPopCurrent)(CUcontext *);
	CUresult (*MemGetInfo)(size_t *, size_t *);
	CUresult (*GetState)(int, CUprocessState *);
	CUresult (*Lock)(int, CUcheckpointLockArgs *);
	CUresult (*Checkpoint)(int, CUcheckpointCheckpointArgs *);
	CUresult (*Restore)(int, CUcheckpointRestoreArgs *);
	CUresult (*Unlock)(int, CUcheckpointUnlockArgs *);
	/* Custom storage, or all NULL (gck_cuda_storage()). */
	CUresult (*OperationComplete)(void *);
	CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t,
		    CUstream);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*MemHostAlloc)(void **, size_t, unsigned int);
	CUresult (*MemFreeHost)(void *);

	nvml_ret (*NvmlInit)(void);
	nvml_ret (*NvmlShutdown)(void);
	nvml_ret (*NvmlDriverVersion)(char *, unsigned int);
	nvml_ret (*NvmlByUuid)(const char *, nvml_dev *);
	nvml_ret (*NvmlMemory)(nvml_dev, struct nvml_memory *);
	nvml_ret (*NvmlMinor)(nvml_dev, unsigned int *);	/* or NULL */
	nvml_ret (*NvmlProcesses)(nvml_dev, unsigned int *,
		    struct nvml_process *);
};

int	gck_cuda_store_copy_out(struct gck_cuda *, struct gck_cproc *);
int	gck_cuda_store_copy_back(struct gck_cuda *, struct gck_cproc *);
int	gck_cuda_store_map_in(struct gck_cuda *, struct gck_cproc *);
int	gck_cuda_store_end_in(struct gck_cuda *, struct gck_cproc *, int);

#endif /* GCK_GPU_CUDAPRIV_H */
