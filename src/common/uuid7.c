/*
 * uuid7.c: UUIDv7 message and lease ids (RFC 9562), monotonic within a backend.
 *
 * 48 bits of Unix milliseconds, then 12 bits used as a sequence within the
 * millisecond (seeded randomly in its lower half so a burst has room to
 * count), then 62 random bits. If the clock stalls or steps back we keep
 * counting on the last millisecond, so ids never go backwards.
 */
#include "common/ids.h"

#include <openssl/rand.h>

#define RANDBUF_SIZE 8192		/* one RAND_bytes call per ~10 pushes of 100 */

static uint8 randbuf[RANDBUF_SIZE];
static int	randpos = RANDBUF_SIZE;
static uint64 last_ms = 0;
static uint32 last_seq = 0;

void
qs_random_bytes(void *buf, int len)
{
	uint8	   *dst = buf;

	while (len > 0)
	{
		int			n;

		if (randpos >= RANDBUF_SIZE)
		{
			if (RAND_bytes(randbuf, RANDBUF_SIZE) != 1)
				ereport(ERROR,
						(errcode(ERRCODE_INTERNAL_ERROR),
						 errmsg("could not generate random bytes")));
			randpos = 0;
		}
		n = Min(len, RANDBUF_SIZE - randpos);
		memcpy(dst, randbuf + randpos, n);
		randpos += n;
		dst += n;
		len -= n;
	}
}

void
qs_uuid7(pg_uuid_t *out)
{
	TimestampTz now = GetCurrentTimestamp();
	uint64		ms;
	uint8	   *b = out->data;

	ms = (uint64) (now / 1000) +
		(uint64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000;

	if (ms > last_ms)
	{
		uint16		r;

		qs_random_bytes(&r, sizeof(r));
		last_ms = ms;
		last_seq = r & 0x7FF;
	}
	else if (++last_seq > 0xFFF)
	{
		last_ms++;
		last_seq = 0;
	}

	qs_random_bytes(b + 8, 8);
	b[0] = (uint8) (last_ms >> 40);
	b[1] = (uint8) (last_ms >> 32);
	b[2] = (uint8) (last_ms >> 24);
	b[3] = (uint8) (last_ms >> 16);
	b[4] = (uint8) (last_ms >> 8);
	b[5] = (uint8) last_ms;
	b[6] = 0x70 | (uint8) (last_seq >> 8);
	b[7] = (uint8) last_seq;
	b[8] = 0x80 | (b[8] & 0x3F);
}

void
qs_uuid_format(const pg_uuid_t *u, char *out)
{
	static const char hex[] = "0123456789abcdef";
	int			p = 0;

	for (int i = 0; i < UUID_LEN; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[p++] = '-';
		out[p++] = hex[u->data[i] >> 4];
		out[p++] = hex[u->data[i] & 0x0F];
	}
	out[p] = '\0';
}

/* Strict 8-4-4-4-12 form only: ids on the wire are always hyphenated. */
bool
qs_uuid_parse(const char *s, int len, pg_uuid_t *out)
{
	int			p = 0;

	if (len != QS_UUID_STRLEN)
		return false;
	for (int i = 0; i < UUID_LEN; i++)
	{
		int			hi,
					lo;

		if (i == 4 || i == 6 || i == 8 || i == 10)
		{
			if (s[p] != '-')
				return false;
			p++;
		}
		hi = qs_hexval(s[p]);
		lo = qs_hexval(s[p + 1]);
		if (hi < 0 || lo < 0)
			return false;
		out->data[i] = (uint8) ((hi << 4) | lo);
		p += 2;
	}
	return true;
}

PG_FUNCTION_INFO_V1(qs_uuid_generate_v7);
Datum
qs_uuid_generate_v7(PG_FUNCTION_ARGS)
{
	pg_uuid_t  *u = palloc(sizeof(pg_uuid_t));

	qs_uuid7(u);
	PG_RETURN_UUID_P(u);
}
