/*
 * gpus.c: reading FAKECUDA_DIR/gpus, one GPU per line:
 *	UUID MAJOR.MINOR TOTAL_BYTES PCI_BUS_ID NAME...
 * The ordinal of a GPU is its place among the valid lines.
 */
#include "config.h"

#include <sys/types.h>
#include <sys/stat.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpus.h"

static int	 maps_file(pid_t, const char *);

/* A zombie counts as alive: its PID is still taken. */
int
pid_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno != ESRCH;
}

/*
 * The last field of NSpid in status, the /proc status file of a task
 * that is self to the caller: the PID it has in its own, innermost PID
 * namespace (self on a kernel without NSpid).  -1 when the file cannot
 * be read: there is no such task.
 */
pid_t
pid_inner(const char *status, pid_t self)
{
	char	 line[512], *p, *e;
	FILE	*f;
	long	 n, last = self;

	if ((f = fopen(status, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL) {
		if (strncmp(line, "NSpid:", 6) != 0)
			continue;
		for (p = line + 6; ; p = e) {
			n = strtol(p, &e, 10);
			if (e == p)
				break;
			last = n;
		}
		break;
	}
	fclose(f);
	return last > 0 && last <= INT_MAX ? (pid_t)last : self;
}

/*
 * The key of the process pid as the caller sees it: its PID in its own
 * namespace, under which it keeps its files; pid itself in the caller's
 * namespace, or when that cannot be told.
 */
pid_t
pid_key(pid_t pid)
{
	char	path[64];
	pid_t	k;

	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	k = pid_inner(path, pid);
	return k == -1 ? pid : k;
}

/* Returns 1 if the process maps the file at the absolute path. */
static int
maps_file(pid_t pid, const char *path)
{
	char	 name[64], *line = NULL;
	size_t	 sz = 0, plen = strlen(path);
	ssize_t	 n;
	FILE	*f;
	int	 found = 0;

	snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
	if ((f = fopen(name, "re")) == NULL)
		return 0;
	while (!found && (n = getline(&line, &sz, f)) != -1) {
		if (n > 0 && line[n - 1] == '\n')
			line[--n] = '\0';
		found = (size_t)n > plen && line[n - plen - 1] == ' ' &&
		    strcmp(line + n - plen, path) == 0;
	}
	free(line);
	fclose(f);
	return found;
}

/*
 * The live process, as the caller sees it, that holds the memory file
 * path of key (mem/UUID/KEY): key itself if it maps the file, else a
 * process whose PID in its own namespace is key and that maps it (all
 * of /proc is read: the tests can afford it).  A process that holds
 * device memory maps all of its file; an empty file, that of a context
 * without memory, is held by a process whose PID in its own namespace
 * is key, key itself first.  A file that nobody maps is otherwise left
 * by a process that is gone, as a killed one's is.  Returns -1 when
 * there is none.
 */
pid_t
mem_holder(const char *path, pid_t key)
{
	struct dirent	*de;
	struct stat	 st;
	char		 real[PATH_MAX], status[64], *e;
	pid_t		 found = -1;
	DIR		*d;
	long		 pid;
	int		 empty;

	if (realpath(path, real) == NULL || stat(real, &st) == -1)
		return -1;
	empty = st.st_size == 0;
	if (!empty && maps_file(key, real))
		return key;
	snprintf(status, sizeof status, "/proc/%d/status", (int)key);
	if (empty && pid_inner(status, key) == key)
		return key;
	if ((d = opendir("/proc")) == NULL)
		return -1;
	while (found == -1 && (de = readdir(d)) != NULL) {
		pid = strtol(de->d_name, &e, 10);
		if (*e != '\0' || pid <= 0 || pid > INT_MAX || pid == key)
			continue;
		snprintf(status, sizeof status, "/proc/%ld/status", pid);
		if (pid_inner(status, (pid_t)pid) == key &&
		    (empty || maps_file((pid_t)pid, real)))
			found = (pid_t)pid;
	}
	closedir(d);
	return found;
}

/* Cuts the next blank-separated word off *pp; NULL at the end. */
char *
next_word(char **pp)
{
	char	*p = *pp, *w;

	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	if (*p == '\0') {
		*pp = p;
		return NULL;
	}
	w = p;
	while (*p != '\0' && *p != ' ' && *p != '\t' && *p != '\n' &&
	    *p != '\r')
		p++;
	if (*p != '\0')
		*p++ = '\0';
	*pp = p;
	return w;
}

/* "GPU-" and 8-4-4-4-12 hex digits: the 16 bytes in order. */
int
uuid_parse(const char *s, unsigned char *u)
{
	size_t	i, n = 0;
	int	hi, lo;

	if (strncmp(s, "GPU-", 4) != 0 || strlen(s) != UUIDLEN - 1)
		return -1;
	s += 4;
	for (i = 0; i < 36; ) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return -1;
			i++;
			continue;
		}
		if (!isxdigit((unsigned char)s[i]) ||
		    !isxdigit((unsigned char)s[i + 1]))
			return -1;
		hi = isdigit((unsigned char)s[i]) ? s[i] - '0' :
		    tolower((unsigned char)s[i]) - 'a' + 10;
		lo = isdigit((unsigned char)s[i + 1]) ? s[i + 1] - '0' :
		    tolower((unsigned char)s[i + 1]) - 'a' + 10;
		u[n++] = (unsigned char)(hi << 4 | lo);
		i += 2;
	}
	return 0;
}

void
uuid_format(const unsigned char *u, char *s)
{
	snprintf(s, UUIDLEN, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3], u[4],
	    u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
	    u[15]);
}

/* One line of gpus; -1 for a blank, comment or malformed line. */
int
gpu_parse(char *line, struct gpu *g)
{
	char		*p = line, *uuid, *cc, *total, *pci, *e;
	size_t		 n;

	memset(g, 0, sizeof *g);
	if ((uuid = next_word(&p)) == NULL || *uuid == '#' ||
	    (cc = next_word(&p)) == NULL || (total = next_word(&p)) == NULL ||
	    (pci = next_word(&p)) == NULL)
		return -1;
	while (*p == ' ' || *p == '\t')
		p++;
	n = strcspn(p, "\r\n");
	while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	if (n == 0 || n >= sizeof g->name || strlen(pci) >= sizeof g->pci)
		return -1;
	memcpy(g->name, p, n);
	g->name[n] = '\0';
	if (uuid_parse(uuid, g->uuid) == -1)
		return -1;
	uuid_format(g->uuid, g->uuidstr);
	if (sscanf(cc, "%d.%d", &g->major, &g->minor) != 2)
		return -1;
	errno = 0;
	g->total = strtoull(total, &e, 10);
	if (errno != 0 || *e != '\0')
		return -1;
	strcpy(g->pci, pci);
	return 0;
}

/*
 * Reads dir/gpus afresh and returns how many GPUs it lists.  When
 * ordinal is not -1 or uuid not NULL, the GPU found that way is copied
 * to *g and its ordinal to *ordp (-1 when there is none).
 */
int
gpus_scan(const char *dir, int ordinal, const unsigned char *uuid,
    struct gpu *g, int *ordp)
{
	struct gpu	 cur;
	char		 path[PATH_MAX], line[1024];
	FILE		*f;
	int		 n = 0;

	if (ordp != NULL)
		*ordp = -1;
	if (dir == NULL)
		return 0;
	snprintf(path, sizeof path, "%s/gpus", dir);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	while (n < MAXGPUS && fgets(line, sizeof line, f) != NULL) {
		if (gpu_parse(line, &cur) == -1)
			continue;
		if (ordp != NULL && *ordp == -1 && (n == ordinal ||
		    (uuid != NULL && memcmp(uuid, cur.uuid, 16) == 0))) {
			*g = cur;
			*ordp = n;
		}
		n++;
	}
	fclose(f);
	return n;
}

