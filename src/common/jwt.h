/*
 * jwt.h: jwt.c: bearer tokens, the access levels they grant, the token
 * settings.
 */
#ifndef QS_JWT_H
#define QS_JWT_H

#include "common/base.h"

/* jwt.c: bearer tokens and the access levels their `role` claim grants */
typedef enum QsAccess
{
	QS_ACCESS_NONE = 0,
	QS_ACCESS_READ,				/* read-only */
	QS_ACCESS_WRITE,			/* read-write */
	QS_ACCESS_ADMIN,			/* admin */
	QS_ACCESS_PUSH_ONLY			/* write-only: push and nothing else */
} QsAccess;

typedef struct QsToken
{
	QsAccess	level;
	char	   *sub;			/* NULL when absent */
	char	   *tenant;			/* the jwt_tenant_claim claim; NULL when absent or unset */
	bool		tenant_present; /* that claim is in the token, a string or not */
} QsToken;

#define QS_AUTH_OFF 0
#define QS_AUTH_JWT 1
extern int	qs_auth_mode;
extern char *qs_jwt_secret;
extern char *qs_jwt_secret_file;
extern char *qs_jwt_public_key_file;
extern char *qs_jwt_tenant_claim;
extern bool qs_jwt_require_exp;
extern char *qs_jwt_issuer;
extern char *qs_jwt_audience;
extern const char *qs_jwt_verify(const char *token, int len, QsToken *out);
extern bool qs_access_allows(QsAccess have, QsAccess need);

#endif							/* QS_JWT_H */
