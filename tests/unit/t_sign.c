/*
 * Unit tests for sign.c: who made a signature, read from its SSHSIG
 * text; and signing and checking through ssh-keygen.
 */

#include "config.h"

#include <sys/types.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "unit.h"
#include "image/sign.h"

/*
 * Signatures made by ssh-keygen -Y sign of the 13 bytes "trailer-bytes",
 * and the fingerprints ssh-keygen -l prints of their keys.
 */
static const char sig_ed25519[] =
    "-----BEGIN SSH SIGNATURE-----\n"
    "U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAgtVGoe12wxCowHmt/W6PrxjBv7L\n"
    "3T1ZMQZ+XSUfScbL8AAAANZ3B1Y2twdC1pbWFnZQAAAAAAAAAGc2hhNTEyAAAAUwAAAAtz\n"
    "c2gtZWQyNTUxOQAAAEC9kQnyU4FYB/+VZuut3KB31YNM41X8IF+FZhOzzrKULvUOxy8uDN\n"
    "QMXNCTvwuwDYqcm6UiGjqCgMCg47Kq4+sA\n"
    "-----END SSH SIGNATURE-----\n";
static const char fp_ed25519[] =
    "SHA256:g1XDOrxyNTuwX9IhoYeD0zV5HSQQn+q9H7ArD3dZFdo";
static const char sig_ecdsa[] =
    "-----BEGIN SSH SIGNATURE-----\n"
    "U1NIU0lHAAAAAQAAAGgAAAATZWNkc2Etc2hhMi1uaXN0cDI1NgAAAAhuaXN0cDI1NgAAAE\n"
    "EEZrVV7JFBa86hjqOhN3lKcMdgc7OedmW1w5ZwLe/nk3C1MFOlzQMiCAH/htHAcbdXKL//\n"
    "H6QTr5gv/UUhNsFL9AAAAA1ncHVja3B0LWltYWdlAAAAAAAAAAZzaGE1MTIAAABkAAAAE2\n"
    "VjZHNhLXNoYTItbmlzdHAyNTYAAABJAAAAIQCb0dD6ke1Axaazh14mBhgRLBfC7WNwHdSO\n"
    "AePdQAouFAAAACAdAjqDuarJDU1iOQT5buU4PWlj828ysRJnmdoegI1gzA==\n"
    "-----END SSH SIGNATURE-----\n";
static const char fp_ecdsa[] =
    "SHA256:Hne+O3U2Glmt2MxQnSfCcIhVeAl0X5hOeNua1vJTr8M";
/* The ed25519 key's, in the namespace "git". */
static const char sig_git[] =
    "-----BEGIN SSH SIGNATURE-----\n"
    "U1NIU0lHAAAAAQAAADMAAAALc3NoLWVkMjU1MTkAAAAgtVGoe12wxCowHmt/W6PrxjBv7L\n"
    "3T1ZMQZ+XSUfScbL8AAAADZ2l0AAAAAAAAAAZzaGE1MTIAAABTAAAAC3NzaC1lZDI1NTE5\n"
    "AAAAQEyvjpxh/BPKaetZhg0fb2Pa8n3TpdiXL7vw1O1ZRHbj7x902FPDzEEsdtFooZZOdT\n"
    "y2oKPL5GA19WbHvFCYmAg=\n"
    "-----END SSH SIGNATURE-----\n";

static void
test_key(void **state)
{
	struct unit		*u = *state;
	struct gck_sigkey	 k;

	assert_int_equal(gck_sig_key(u->ctx, sig_ed25519, strlen(sig_ed25519),
	    &k), GCK_OK);
	assert_string_equal(k.type, "ED25519");
	assert_string_equal(k.fp, fp_ed25519);
	assert_int_equal(gck_sig_key(u->ctx, sig_ecdsa, strlen(sig_ecdsa),
	    &k), GCK_OK);
	assert_string_equal(k.type, "ECDSA");
	assert_string_equal(k.fp, fp_ecdsa);
}

static void
test_key_namespace(void **state)
{
	struct unit		*u = *state;
	struct gck_sigkey	 k;

	assert_int_equal(gck_sig_key(u->ctx, sig_git, strlen(sig_git), &k),
	    GCK_ESIGN);
	assert_non_null(strstr(gck_error_string(u->ctx), "namespace"));
}

/* sig with the bytes [from, to) of its text replaced by repl. */
static char *
spliced(const char *sig, size_t from, size_t to, const char *repl)
{
	char	*s;

	assert_true(asprintf(&s, "%.*s%s%s", (int)from, sig, repl,
	    sig + to) != -1);
	return s;
}

static void
test_key_garbage(void **state)
{
	struct unit		*u = *state;
	struct gck_sigkey	 k;
	const char		*b64 = strchr(sig_ed25519, '\n') + 1;
	size_t			 at = (size_t)(b64 - sig_ed25519);
	char			*s, *big;
	size_t			 i;
	const char		*bad[] = {
		"",
		"not a signature",
		"-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----\n",
		"-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n",
		"-----BEGIN SSH SIGNATURE-----\n!!!!\n"
		    "-----END SSH SIGNATURE-----\n",
		"-----BEGIN SSH SIGNATURE-----\nQUJD\n"
		    "-----END SSH SIGNATURE-----\n",
	};

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(gck_sig_key(u->ctx, bad[i], strlen(bad[i]),
		    &k), GCK_EFORMAT);
	/* Cut short: the blob ends inside the public key. */
	s = spliced(sig_ed25519, at + 40, strlen(sig_ed25519) - 28, "\n");
	assert_int_equal(gck_sig_key(u->ctx, s, strlen(s), &k), GCK_EFORMAT);
	free(s);
	/* Another magic. */
	s = spliced(sig_ed25519, at, at + 4, "V1NI");
	assert_int_equal(gck_sig_key(u->ctx, s, strlen(s), &k), GCK_EFORMAT);
	free(s);
	/* Larger than an image's signature may be. */
	big = calloc(1, GCK_SIG_MAX + 2);
	assert_non_null(big);
	memcpy(big, sig_ed25519, strlen(sig_ed25519));
	memset(big + strlen(sig_ed25519), '\n', GCK_SIG_MAX + 1 -
	    strlen(sig_ed25519));
	assert_int_equal(gck_sig_key(u->ctx, big, GCK_SIG_MAX + 1, &k),
	    GCK_EFORMAT);
	free(big);
}

/* Runs the shell command fmt in u's directory; asserts it succeeds. */
static void
sh(struct unit *u, const char *fmt, ...)
{
	va_list	 ap;
	char	*cmd, *full;

	va_start(ap, fmt);
	assert_true(vasprintf(&cmd, fmt, ap) != -1);
	va_end(ap);
	assert_true(asprintf(&full, "cd '%s' && %s", u->dir, cmd) != -1);
	assert_int_equal(system(full), 0);
	free(cmd);
	free(full);
}

static void
test_sign_check_verify(void **state)
{
	struct unit	*u = *state;
	const char	 data[] = "{\"format\":2,\"entries\":[]}";
	char		 key[PATH_MAX + 8], allowed[PATH_MAX + 16];
	char		 other[PATH_MAX + 16], *sig, *who;
	size_t		 siglen;

	sh(u, "ssh-keygen -q -t ed25519 -N '' -C alice -f key && "
	    "ssh-keygen -q -t ed25519 -N '' -C carol -f carol && "
	    "echo \"alice $(cat key.pub)\" >allowed && "
	    "echo \"carol $(cat carol.pub)\" >other && "
	    "echo \"not a key\" >junk");
	snprintf(key, sizeof key, "%s/key", u->dir);
	snprintf(allowed, sizeof allowed, "%s/allowed", u->dir);
	snprintf(other, sizeof other, "%s/other", u->dir);
	assert_int_equal(gck_sig_usable(u->ctx, key), GCK_OK);
	assert_int_equal(gck_sig_sign(u->ctx, key, data, strlen(data), &sig,
	    &siglen), GCK_OK);
	assert_int_equal(gck_sig_check(u->ctx, sig, siglen, data,
	    strlen(data)), GCK_OK);
	/* One byte of the data changed. */
	assert_int_equal(gck_sig_check(u->ctx, sig, siglen, data,
	    strlen(data) - 1), GCK_ESIGN);
	assert_non_null(strstr(gck_error_string(u->ctx), "does not match"));
	assert_int_equal(gck_sig_verify(u->ctx, allowed, sig, siglen, data,
	    strlen(data), &who), GCK_OK);
	assert_string_equal(who, "alice");
	free(who);
	assert_int_equal(gck_sig_verify(u->ctx, other, sig, siglen, data,
	    strlen(data), &who), GCK_ESIGN);
	assert_null(who);
	assert_non_null(strstr(gck_error_string(u->ctx), "does not allow"));
	free(sig);
	/* A file that is no key, and none. */
	snprintf(other, sizeof other, "%s/junk", u->dir);
	assert_int_equal(gck_sig_usable(u->ctx, other), GCK_EINVAL);
	snprintf(other, sizeof other, "%s/none", u->dir);
	assert_int_equal(gck_sig_usable(u->ctx, other), GCK_ESYS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_key, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_key_namespace, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_key_garbage, unit_setup,
		    unit_teardown),
		cmocka_unit_test_setup_teardown(test_sign_check_verify,
		    unit_setup, unit_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
