/*
 * gpus.c: reading FAKECUDA_DIR/gpus, one GPU per line:
 *	UUID MAJOR.MINOR TOTAL_BYTES PCI_BUS_ID NAME...
 * The ordinal of a GPU is its place among the valid lines.
 */
#include "config.h"

#include <sys/types.h>

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpus.h"

/* A zombie counts as alive: its PID is still taken. */
int
pid_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno != ESRCH;
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

