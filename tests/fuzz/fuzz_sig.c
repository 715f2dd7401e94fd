/*
 * fuzz_sig: the bytes are an image's signature, the data of its entry
 * gpuckpt.sig, read as gpurestore and gpuinspect read one to say who
 * signed (gck_sig_key()): the armour found, the base64 decoded, the
 * SSHSIG's magic, version, public key, key type and namespace parsed,
 * the key's fingerprint made.  Nothing is verified there, and nothing
 * runs ssh-keygen.
 *
 * The first byte chooses how the rest is given: with its low bit
 * clear, as it is; set, as the binary SSHSIG that ssh-keygen armours,
 * armoured here (base64 in lines of 70, between the lines that begin
 * and end a signature), so that what the fuzzer changes reaches the
 * parser of the SSHSIG and not only the decoder of base64.
 *
 * The input is copied to a buffer of its exact length, without a NUL
 * after it: a read past the signature's end is a report of ASan.
 */
#include "config.h"

#include "private.h"
#include "image/sign.h"
#include "fuzz.h"

#define BEGIN	"-----BEGIN SSH SIGNATURE-----\n"
#define END	"-----END SSH SIGNATURE-----\n"

static char	*armour(const uint8_t *, size_t, size_t *);
static void	 check(struct gck_ctx *, int, const struct gck_sigkey *);

/*
 * bin (len bytes) armoured as ssh-keygen writes it: base64 in lines of
 * 70; *lenp gets its length.
 */
static char *
armour(const uint8_t *bin, size_t len, size_t *lenp)
{
	static const char	 b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "abcdefghijklmnopqrstuvwxyz0123456789+/";
	char			*s, *p, q[4];
	uint32_t		 v;
	size_t			 i, j, col = 0, n;

	n = (len + 2) / 3 * 4;
	if ((s = malloc(strlen(BEGIN) + n + n / 70 + 1 + strlen(END))) ==
	    NULL)
		abort();
	p = s;
	memcpy(p, BEGIN, strlen(BEGIN));
	p += strlen(BEGIN);
	for (i = 0; i < len; i += 3) {
		v = (uint32_t)bin[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)bin[i + 1] << 8;
		if (i + 2 < len)
			v |= bin[i + 2];
		q[0] = b64[v >> 18 & 63];
		q[1] = b64[v >> 12 & 63];
		q[2] = i + 1 < len ? b64[v >> 6 & 63] : '=';
		q[3] = i + 2 < len ? b64[v & 63] : '=';
		for (j = 0; j < 4; j++) {
			*p++ = q[j];
			if (++col == 70) {
				*p++ = '\n';
				col = 0;
			}
		}
	}
	if (col != 0)
		*p++ = '\n';
	memcpy(p, END, strlen(END));
	p += strlen(END);
	*lenp = (size_t)(p - s);
	return s;
}

/* Aborts on what gck_sig_key() may not do, whatever its input. */
static void
check(struct gck_ctx *ctx, int r, const struct gck_sigkey *k)
{
	fuzz_say("sig", r, gck_error_string(ctx));
	switch (r) {
	case GCK_OK:
		if (memchr(k->type, '\0', sizeof k->type) == NULL ||
		    memchr(k->fp, '\0', sizeof k->fp) == NULL ||
		    k->type[0] == '\0' || strncmp(k->fp, "SHA256:", 7) != 0 ||
		    strlen(k->fp) != 7 + 43)
			abort();
		break;
	case GCK_EFORMAT:
	case GCK_ESIGN:
		if (gck_error_string(ctx) == NULL || k->type[0] != '\0' ||
		    k->fp[0] != '\0')
			abort();
		break;
	default:
		/* GCK_ENOMEM included: a malloc() that fails ends the run */
		fprintf(stderr, "fuzz_sig: code %d: %s\n", r,
		    gck_error_string(ctx));
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gck_sigkey	 k;
	struct gck_ctx		*ctx;
	char			*sig;
	size_t			 len;
	int			 r;

	if (size == 0)
		return 0;
	if ((ctx = gck_ctx_new()) == NULL)
		abort();
	if (data[0] & 1)
		sig = armour(data + 1, size - 1, &len);
	else {
		len = size - 1;
		if ((sig = malloc(len > 0 ? len : 1)) == NULL)
			abort();
		memcpy(sig, data + 1, len);
	}
	r = gck_sig_key(ctx, sig, len, &k);
	check(ctx, r, &k);
	free(sig);
	gck_ctx_free(ctx);
	return 0;
}
