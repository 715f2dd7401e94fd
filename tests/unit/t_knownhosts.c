/*
 * Unit tests for known_hosts (transport/knownhosts.c): plain and hashed
 * host names, "[host]:port" against port 22, a changed key, the lines
 * that are skipped or marked, an unknown host, and a key added.  The
 * files are written here; the keys are two ed25519 keys, made once
 * with ssh-keygen, and the hashed line is ssh-keygen -H's.
 */

#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <libssh2.h>

#include "unit.h"

#include "private.h"
#include "transport/knownhosts.h"

#define KEY_A	"AAAAC3NzaC1lZDI1NTE5AAAAIHVPaGaioq7mkOzWGZzHuccmLIKXyTm/3ab202ivCdZO"
#define KEY_B	"AAAAC3NzaC1lZDI1NTE5AAAAIHPIE1y7LhnZtV4q7/+Wu4pKFPKB5+v7If4RxlJMPLXW"
/* "example.org", hashed by ssh-keygen -H */
#define HASHED	"|1|3z9tpLKZ65qebUmPB9TVwFdYpaw=|GDDh0+omvgaym6H/Wu/muVKfnSk="

struct key {
	struct gck_hostkey	hk;
	unsigned char		blob[128];
};

static LIBSSH2_SESSION	*sess;

static int
group_setup(void **state)
{
	(void)state;
	if (libssh2_init(0) != 0 || (sess = libssh2_session_init()) == NULL)
		return -1;
	return 0;
}

static int
group_teardown(void **state)
{
	(void)state;
	libssh2_session_free(sess);
	libssh2_exit();
	return 0;
}

/* Decodes base64 src into dst; returns the length. */
static size_t
unbase64(const char *src, unsigned char *dst)
{
	static const char	 chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "abcdefghijklmnopqrstuvwxyz0123456789+/";
	const char		*p;
	uint32_t		 acc = 0;
	size_t			 n = 0;
	int			 bits = 0;

	for (; *src != '\0' && *src != '='; src++) {
		p = strchr(chars, *src);
		assert_non_null(p);
		acc = acc << 6 | (uint32_t)(p - chars);
		if ((bits += 6) >= 8) {
			bits -= 8;
			dst[n++] = (unsigned char)(acc >> bits);
		}
	}
	return n;
}

/* The host key k as a server would show it. */
static const struct gck_hostkey *
key(struct key *k, const char *b64)
{
	memset(k, 0, sizeof *k);
	k->hk.len = unbase64(b64, k->blob);
	k->hk.blob = k->blob;
	k->hk.kbit = LIBSSH2_KNOWNHOST_KEY_ED25519;
	snprintf(k->hk.type, sizeof k->hk.type, "ssh-ed25519");
	snprintf(k->hk.fp, sizeof k->hk.fp, "SHA256:test");
	k->hk.b64 = (char *)b64;
	return &k->hk;
}

/* Writes text to the scratch directory's known_hosts and reads it. */
static struct gck_known *
load(struct unit *u, const char *text)
{
	struct gck_known	*k;
	FILE			*f;

	assert_non_null(f = fopen(unit_path(u, "known_hosts"), "w"));
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_gck_ok(u->ctx, gck_known_load(u->ctx, sess, "u@h",
	    unit_path(u, "known_hosts"), &k));
	assert_non_null(k);
	return k;
}

static void
t_plain(void **state)
{
	struct gck_known	*k;
	struct key		 a, b;

	k = load(*state, "example.org ssh-ed25519 " KEY_A "\n"
	    "other.org,10.0.0.1 ssh-ed25519 " KEY_B " a comment\n");
	assert_int_equal(gck_known_check(k, "example.org", key(&a, KEY_A)),
	    GCK_KNOWN_MATCH);
	assert_int_equal(gck_known_check(k, "10.0.0.1", key(&b, KEY_B)),
	    GCK_KNOWN_MATCH);
	assert_int_equal(gck_known_has_type(k, "example.org",
	    LIBSSH2_KNOWNHOST_KEY_ED25519), 1);
	assert_int_equal(gck_known_has_type(k, "example.org",
	    LIBSSH2_KNOWNHOST_KEY_SSHRSA), 0);
	gck_known_free(k);
}

static void
t_hashed(void **state)
{
	struct gck_known	*k;
	struct key		 a;

	k = load(*state, HASHED " ssh-ed25519 " KEY_A "\n");
	assert_int_equal(gck_known_check(k, "example.org", key(&a, KEY_A)),
	    GCK_KNOWN_MATCH);
	assert_int_equal(gck_known_check(k, "example.com", key(&a, KEY_A)),
	    GCK_KNOWN_NOTFOUND);
	gck_known_free(k);
}

static void
t_port(void **state)
{
	struct gck_known	*k;
	struct key		 a;
	char			 name[300], plain[300];

	gck_known_names("Example.ORG", 22, name, sizeof name, plain,
	    sizeof plain);
	assert_string_equal(name, "example.org");
	assert_string_equal(plain, "example.org");
	gck_known_names("Example.ORG", 2222, name, sizeof name, plain,
	    sizeof plain);
	assert_string_equal(name, "[example.org]:2222");
	assert_string_equal(plain, "example.org");

	k = load(*state, "[example.org]:2222 ssh-ed25519 " KEY_A "\n");
	assert_int_equal(gck_known_check(k, "[example.org]:2222",
	    key(&a, KEY_A)), GCK_KNOWN_MATCH);
	/* Listed for port 2222 only: port 22 does not know it. */
	assert_int_equal(gck_known_check(k, "example.org", key(&a, KEY_A)),
	    GCK_KNOWN_NOTFOUND);
	assert_int_equal(gck_known_check(k, "[example.org]:2223",
	    key(&a, KEY_A)), GCK_KNOWN_NOTFOUND);
	gck_known_free(k);

	/* And one listed for port 22 is not taken for another port. */
	k = load(*state, "example.org ssh-ed25519 " KEY_A "\n");
	assert_int_equal(gck_known_check(k, "[example.org]:2222",
	    key(&a, KEY_A)), GCK_KNOWN_NOTFOUND);
	gck_known_free(k);
}

static void
t_changed(void **state)
{
	struct gck_known	*k;
	struct key		 b;

	k = load(*state, "example.org ssh-ed25519 " KEY_A "\n"
	    HASHED " ssh-ed25519 " KEY_A "\n");
	assert_int_equal(gck_known_check(k, "example.org", key(&b, KEY_B)),
	    GCK_KNOWN_CHANGED);
	gck_known_free(k);
}

static void
t_skipped(void **state)
{
	struct gck_known	*k;
	struct key		 a, b;

	k = load(*state, "# a comment\n"
	    "\n"
	    "   \t\n"
	    "  # an indented comment example.org ssh-ed25519 " KEY_B "\n"
	    "@cert-authority example.org ssh-ed25519 " KEY_B "\n"
	    "@revoked * ssh-ed25519 " KEY_B "\n"
	    "not a key line at all\n"
	    "  example.org ssh-ed25519 " KEY_A "  \r\n");
	assert_int_equal(gck_known_check(k, "example.org", key(&a, KEY_A)),
	    GCK_KNOWN_MATCH);
	/* Revoked wherever it shows itself. */
	assert_int_equal(gck_known_check(k, "example.org", key(&b, KEY_B)),
	    GCK_KNOWN_REVOKED);
	assert_int_equal(gck_known_check(k, "other.org", key(&b, KEY_B)),
	    GCK_KNOWN_REVOKED);
	gck_known_free(k);

	/* A cert-authority line alone makes no host known. */
	k = load(*state, "@cert-authority example.org ssh-ed25519 " KEY_B
	    "\n");
	assert_int_equal(gck_known_check(k, "example.org", key(&b, KEY_B)),
	    GCK_KNOWN_NOTFOUND);
	gck_known_free(k);
}

static void
t_unknown(void **state)
{
	struct unit		*u = *state;
	struct gck_known	*k;
	struct key		 a;
	char			 msg[PATH_MAX + 64];

	k = load(u, "example.org ssh-ed25519 " KEY_A "\n");
	assert_int_equal(gck_known_check(k, "unknown.org", key(&a, KEY_A)),
	    GCK_KNOWN_NOTFOUND);
	gck_known_free(k);

	/* No file: no host is known. */
	assert_gck_ok(u->ctx, gck_known_load(u->ctx, sess, "u@h",
	    unit_path(u, "missing"), &k));
	assert_int_equal(gck_known_check(k, "example.org", key(&a, KEY_A)),
	    GCK_KNOWN_NOTFOUND);
	gck_known_free(k);

	/* A file that cannot be read is an error of the connection. */
	snprintf(msg, sizeof msg, "ssh u@h: cannot read '%s': %s", u->dir,
	    strerror(EISDIR));
	assert_gck_fails(u->ctx, gck_known_load(u->ctx, sess, "u@h", u->dir,
	    &k), GCK_ESYS, msg);
	assert_null(k);
	assert_int_equal(gck_errno(u->ctx), EISDIR);
	assert_int_equal(u->ctx->origin, GCK_FROM_SSH);
}

static void
t_add(void **state)
{
	struct unit		*u = *state;
	struct gck_known	*k;
	struct key		 a, b;
	char			 buf[512], want[512], *path;
	ssize_t			 n;
	int			 fd;

	/* Into a new directory, after a line with no newline. */
	path = strdup(unit_path(u, "ssh/known_hosts"));
	assert_non_null(path);
	assert_int_equal(gck_known_add(u->ctx, sess, "u@h", path, 1,
	    "[example.org]:2222", key(&a, KEY_A)), GCK_KNOWN_MATCH);
	assert_int_equal((fd = open(path, O_WRONLY | O_APPEND)) >= 0, 1);
	assert_int_equal(write(fd, "# no newline", 12), 12);
	close(fd);
	assert_int_equal(gck_known_add(u->ctx, sess, "u@h", path, 0,
	    "other.org", key(&b, KEY_B)), GCK_KNOWN_MATCH);
	/* Already there: nothing is added. */
	assert_int_equal(gck_known_add(u->ctx, sess, "u@h", path, 0,
	    "other.org", key(&b, KEY_B)), GCK_KNOWN_MATCH);
	/* Another key for a known host is not added. */
	assert_int_equal(gck_known_add(u->ctx, sess, "u@h", path, 0,
	    "other.org", key(&a, KEY_A)), GCK_KNOWN_CHANGED);

	assert_int_equal((fd = open(path, O_RDONLY)) >= 0, 1);
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	assert_int_equal(n > 0, 1);
	buf[n] = '\0';
	snprintf(want, sizeof want, "[example.org]:2222 ssh-ed25519 %s\n"
	    "# no newline\nother.org ssh-ed25519 %s\n", KEY_A, KEY_B);
	assert_string_equal(buf, want);

	assert_gck_ok(u->ctx, gck_known_load(u->ctx, sess, "u@h", path, &k));
	assert_int_equal(gck_known_check(k, "[example.org]:2222",
	    key(&a, KEY_A)), GCK_KNOWN_MATCH);
	assert_int_equal(gck_known_check(k, "other.org", key(&b, KEY_B)),
	    GCK_KNOWN_MATCH);
	gck_known_free(k);
	free(path);
}

int
main(void)
{
	static const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(t_plain, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(t_hashed, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(t_port, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(t_changed, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(t_skipped, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(t_unknown, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(t_add, unit_setup,
		    unit_teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
