/*
 * guc.h: guc.c and secret_file.c: the settings common owns and the secrets read
 * from files.
 */
#ifndef QS_GUC_H
#define QS_GUC_H

#include "common/base.h"

#include "utils/guc.h"

/*
 * guc.c: the settings this floor owns (the token settings are declared with
 * jwt.c's below); each floor defines its own, in its guc.c, and reads
 * another floor's through that floor's header
 */
extern int	qs_backend_heap_keep_kb;
extern char *qs_encryption_key;
extern char *qs_encryption_key_file;
extern void qs_guc_init(void);
extern const char *qs_workers_database(void);

/* secret_file.c: secrets read from files, at start and on SIGHUP */
extern bool qs_check_jwt_secret_file(char **newval, void **extra, GucSource source);
extern void qs_assign_jwt_secret_file(const char *newval, void *extra);
extern bool qs_check_encryption_key_file(char **newval, void **extra, GucSource source);
extern void qs_assign_encryption_key_file(const char *newval, void *extra);
extern const char *qs_jwt_hmac_secret(void);
extern const char *qs_encryption_key_text(void);

#endif							/* QS_GUC_H */
