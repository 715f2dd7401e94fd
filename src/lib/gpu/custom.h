#ifndef GCK_GPU_CUSTOM_H
#define GCK_GPU_CUSTOM_H

/*
 * Custom storage (driver API 13040, CUDA 13.4): a checkpoint or restore
 * whose arguments name storage_out has the driver map each GPU's memory
 * of the process into the caller, describe it there, and wait for
 * cuCheckpointOperationComplete(handle), which synchronizes the streams,
 * unmaps the memory and ends the operation: the process is then
 * CHECKPOINTED (a checkpoint) or LOCKED (a restore).
 *
 * The CUDA 13.0 cuda.h these are built with does not declare it: the
 * layouts below mirror those of NVIDIA's CUDA Driver API documentation
 * of CUDA 13.4 (CUcheckpointCustomStoragePerDeviceData,
 * CUcheckpointCustomStorageInfo, and the 13.4 CUcheckpointCheckpointArgs
 * and CUcheckpointRestoreArgs, 64 bytes each as in 13.0, whose reserved
 * space the new member takes).  Needs cuda.h first.
 */
struct gck_cu_storage_dev {
	CUdeviceptr	 devptr;	/* the GPU's memory, mapped */
	size_t		 size;
	CUstream	 stream;	/* copies on it; the driver waits on it */
};

struct gck_cu_storage {
	void			*handle;	/* for the complete call */
	struct gck_cu_storage_dev *dev;		/* one a GPU */
	unsigned int		 ndev;
};

struct gck_cu_ckpt_args {
	struct gck_cu_storage	**storage_out;	/* NULL: to host memory */
	char			  reserved[64 - sizeof(void *)];
};

struct gck_cu_restore_args {
	CUcheckpointGpuPair	 *pairs;
	unsigned int		  npairs;
	unsigned int		  padding0;
	struct gck_cu_storage	**storage_out;	/* NULL: from host memory */
	char			  reserved[64 - 2 * sizeof(void *) -
				      2 * sizeof(unsigned int)];
};

_Static_assert(sizeof(struct gck_cu_ckpt_args) ==
    sizeof(CUcheckpointCheckpointArgs), "checkpoint arguments' layout");
_Static_assert(sizeof(struct gck_cu_restore_args) ==
    sizeof(CUcheckpointRestoreArgs), "restore arguments' layout");

#endif /* GCK_GPU_CUSTOM_H */
