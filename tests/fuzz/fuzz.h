/*
 * fuzz.h: what the libFuzzer targets share.  Each target is one .c file
 * that defines LLVMFuzzerTestOneInput(); see "Fuzzing" in HACKING.
 */
#ifndef GCK_FUZZ_H
#define GCK_FUZZ_H

#include <sys/mman.h>
#include <sys/types.h>

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

/* A memfd holding len bytes of data, at offset 0; aborts on failure. */
static inline int
fuzz_memfd(const void *data, size_t len)
{
	const char	*p = data;
	ssize_t		 n;
	int		 fd;

	if ((fd = memfd_create("fuzz", MFD_CLOEXEC)) == -1)
		abort();
	while (len > 0) {
		if ((n = write(fd, p, len)) <= 0)
			abort();
		p += n;
		len -= (size_t)n;
	}
	if (lseek(fd, 0, SEEK_SET) != 0)
		abort();
	return fd;
}

/* A private directory of this process under $TMPDIR; aborts on failure. */
static inline char *
fuzz_tmpdir(const char *what)
{
	const char	*tmp = getenv("TMPDIR");
	char		*dir;

	if (tmp == NULL || *tmp == '\0')
		tmp = "/tmp";
	if (asprintf(&dir, "%s/gck-fuzz-%s.XXXXXX", tmp, what) == -1 ||
	    mkdtemp(dir) == NULL)
		abort();
	return dir;
}

/* Empties dir, which holds only plain files; aborts if it cannot. */
static inline void
fuzz_empty(const char *dir)
{
	struct dirent	*d;
	DIR		*dp;
	char		 path[4096];

	if ((dp = opendir(dir)) == NULL)
		abort();
	while ((d = readdir(dp)) != NULL) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, d->d_name);
		if (unlink(path) == -1)
			abort();
	}
	closedir(dp);
}

/*
 * With $GCK_FUZZ_VERBOSE set, says on stderr how the input fared: to
 * see what a seed reaches.
 */
static inline void
fuzz_say(const char *what, int r, const char *msg)
{
	if (getenv("GCK_FUZZ_VERBOSE") != NULL)
		fprintf(stderr, "%s: %d %s\n", what, r, msg != NULL ? msg : "");
}

/* Removes the directory fuzz_tmpdir() made, at exit. */
static inline void
fuzz_rmdir(const char *dir)
{
	fuzz_empty(dir);
	rmdir(dir);
}

#endif /* GCK_FUZZ_H */
