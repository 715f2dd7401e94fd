/*
 * gpus.h: the fake GPUs, as FAKECUDA_DIR/gpus lists them, shared by the
 * stand-in libcuda.so.1 and libnvidia-ml.so.1.  Nothing here is exported
 * from either library.
 */
#ifndef FAKECUDA_GPUS_H
#define FAKECUDA_GPUS_H

#include <sys/types.h>

#define MAXGPUS		64
#define UUIDLEN		41		/* "GPU-" 8-4-4-4-12, NUL */

struct gpu {
	unsigned char	 uuid[16];
	char		 uuidstr[UUIDLEN];	/* lowercase, as drivers write it */
	int		 major, minor;
	unsigned long long total;
	char		 pci[32];
	char		 name[256];
};

#pragma GCC visibility push(hidden)
int	 pid_alive(pid_t);
pid_t	 pid_inner(const char *, pid_t);
pid_t	 pid_key(pid_t);
pid_t	 mem_holder(const char *, pid_t);
char	*next_word(char **);
int	 uuid_parse(const char *, unsigned char *);
void	 uuid_format(const unsigned char *, char *);
int	 gpu_parse(char *, struct gpu *);
int	 gpus_scan(const char *, int, const unsigned char *, struct gpu *,
	    int *);
#pragma GCC visibility pop

#endif /* FAKECUDA_GPUS_H */
