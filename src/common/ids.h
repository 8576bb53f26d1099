/*
 * ids.h: uuid7.c and tenant.c: ids, their text form, tenants.
 */
#ifndef QS_IDS_H
#define QS_IDS_H

#include "common/base.h"

/* uuid7.c */
extern void qs_uuid7(pg_uuid_t *out);
extern void qs_uuid_format(const pg_uuid_t *u, char *out);	/* out: 37 bytes */
extern bool qs_uuid_parse(const char *s, int len, pg_uuid_t *out);
extern void qs_random_bytes(void *buf, int len);

/* A hex digit's value, 0-15, or -1 (inline: the fuzz harnesses use it alone). */
static inline int
qs_hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* tenant.c */
extern const pg_uuid_t qs_default_tenant;
extern void qs_tenant_arg(FunctionCallInfo fcinfo, int argno, pg_uuid_t *out);
extern Datum qs_uuid_datum(const pg_uuid_t *u);

#endif							/* QS_IDS_H */
