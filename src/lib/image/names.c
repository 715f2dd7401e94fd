/*
 * names.c: the names of an image's entries, and of the criu options it
 * records.  Whoever builds or reads an entry name does it here.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "private.h"
#include "image/names.h"

/* The options of criu a tree may need (GCK_CRIU_*), as criu names them. */
static const struct {
	unsigned int	 bit;
	const char	*name;
	const char	*arg;
} criu_opts[] = {
	{ GCK_CRIU_TCP_ESTABLISHED,	"tcp-established", "--tcp-established" },
	{ GCK_CRIU_EXT_UNIX_SK,		"ext-unix-sk",	"--ext-unix-sk" },
	{ GCK_CRIU_FILE_LOCKS,		"file-locks",	"--file-locks" },
	{ GCK_CRIU_TCP_CLOSE,		"tcp-close",	"--tcp-close" },
};
#define NCRIU_OPTS	(sizeof criu_opts / sizeof criu_opts[0])

/* The index of option bit in criu_opts, or -1. */
static int
opt_index(unsigned int bit)
{
	size_t	i;

	for (i = 0; i < NCRIU_OPTS; i++)
		if (criu_opts[i].bit == bit)
			return (int)i;
	return -1;
}

const char *
gck_criu_opt_name(unsigned int bit)
{
	int	i = opt_index(bit);

	return i == -1 ? NULL : criu_opts[i].name;
}

/* The GCK_CRIU_* bit of the option criu names name, or 0. */
unsigned int
gck_criu_opt_bit(const char *name)
{
	size_t	i;

	for (i = 0; i < NCRIU_OPTS; i++)
		if (strcmp(criu_opts[i].name, name) == 0)
			return criu_opts[i].bit;
	return 0;
}

/* The argument of criu's command line for the option bit, or NULL. */
const char *
gck_criu_opt_arg(unsigned int bit)
{
	int	i = opt_index(bit);

	return i == -1 ? NULL : criu_opts[i].arg;
}

/* A CRIU file name: a plain name of [A-Za-z0-9._-], not starting '.'. */
int
gck_criu_name_ok(const char *s)
{
	size_t	i;

	if (s[0] == '\0' || s[0] == '.' || strlen(s) > GCK_NAME_MAX)
		return 0;
	for (i = 0; s[i] != '\0'; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' &&
		    s[i] != '_' && s[i] != '-')
			return 0;
	return 1;
}

/*
 * The entry of CRIU file file: "criu/FILE" for a file in one entry (part
 * -1), "criu/FILE.partNNNNN" for part part of a larger one.
 */
void
gck_entry_name(char *buf, size_t len, const char *file, long part)
{
	if (part < 0)
		snprintf(buf, len, GCK_ENTRY_CRIU "%s", file);
	else
		snprintf(buf, len, GCK_ENTRY_CRIU "%s.part%05ld", file, part);
}

/*
 * Reads an entry name back: the CRIU file it holds into file (len bytes)
 * and its part into *partp (-1: the whole file).  Returns 0, or -1 when
 * it is not the entry of a CRIU file of a safe name.
 */
int
gck_entry_parse(const char *entry, char *file, size_t len, long *partp)
{
	const char	*base;
	char		*end;
	size_t		 bl;
	long		 part = -1;

	if (strncmp(entry, GCK_ENTRY_CRIU, strlen(GCK_ENTRY_CRIU)) != 0 ||
	    !gck_criu_name_ok(entry + strlen(GCK_ENTRY_CRIU)))
		return -1;
	base = entry + strlen(GCK_ENTRY_CRIU);
	bl = strlen(base);
	if (bl > 10 && strncmp(base + bl - 10, ".part", 5) == 0) {
		part = strtol(base + bl - 5, &end, 10);
		if (*end != '\0' || !isdigit((unsigned char)base[bl - 5]))
			part = -1;
		else
			bl -= 10;
	}
	snprintf(file, len, "%.*s", (int)bl, base);
	*partp = part;
	return 0;
}

/* The name of part part of the page index (format 3). */
void
gck_pidx_name(char *buf, size_t len, unsigned part)
{
	snprintf(buf, len, GCK_ENTRY_PAGES "%05u", part);
}

/*
 * The number of the part of the page index that entry name is, or -1
 * if it is none: five digits or more, the first 0 only in 00000 to
 * 09999, as gck_pidx_name() gives them.
 */
long
gck_pidx_part(const char *name)
{
	const char	*p;
	long		 v = 0;
	size_t		 n;

	if (strncmp(name, GCK_ENTRY_PAGES, strlen(GCK_ENTRY_PAGES)) != 0)
		return -1;
	p = name + strlen(GCK_ENTRY_PAGES);
	for (n = 0; p[n] != '\0'; n++)
		if (!isdigit((unsigned char)p[n]) || n >= 9)
			return -1;
		else
			v = v * 10 + (p[n] - '0');
	if (n < 5 || (n > 5 && p[0] == '0'))
		return -1;
	return v;
}

/* An entry as messages name it: "'pages-1.img' part 12". */
void
gck_entry_display(const char *name, char *buf, size_t len)
{
	const char	*p;
	size_t		 l;

	if (strncmp(name, GCK_ENTRY_CRIU, strlen(GCK_ENTRY_CRIU)) == 0)
		name += strlen(GCK_ENTRY_CRIU);
	l = strlen(name);
	if (l > 10 && (p = name + l - 10, strncmp(p, ".part", 5) == 0))
		snprintf(buf, len, "'%.*s' part %d", (int)(l - 10), name,
		    atoi(p + 5));
	else
		snprintf(buf, len, "'%s'", name);
}

/* Whether name is a pages file, pages-ID.img; its ID in *idp. */
int
gck_pages_id(const char *name, unsigned *idp)
{
	unsigned long	 v;
	char		*end;

	if (strncmp(name, "pages-", 6) != 0 || !isdigit((unsigned char)name[6]))
		return 0;
	errno = 0;
	v = strtoul(name + 6, &end, 10);
	if (errno != 0 || v > UINT_MAX || strcmp(end, ".img") != 0)
		return 0;
	*idp = (unsigned)v;
	return 1;
}

/*
 * The size a reference record gives its chunk: decimal digits, at most
 * the largest part.  Returns it, or 0 if it is not one.
 */
uint64_t
gck_ref_size(const void *v, size_t len)
{
	const char	*p = v;
	uint64_t	 n = 0;
	size_t		 i;

	if (len == 0 || len > 10 || p[0] == '0')
		return 0;
	for (i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return 0;
		n = n * 10 + (uint64_t)(p[i] - '0');
	}
	return n <= GCK_PART_MAX ? n : 0;
}
