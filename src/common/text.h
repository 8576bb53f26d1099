/*
 * text.h: text.c: the one rule for strings from URLs and segments, and for
 * names.
 */
#ifndef QS_TEXT_H
#define QS_TEXT_H

#include "common/base.h"

/* text.c: the one rule for strings from URLs and segments */
#define QS_NAME_MAX 255			/* queue, partition and consumer group names, in bytes */
extern const char *qs_text_problem(const char *s, size_t len, size_t max_len);
extern void qs_check_text(const char *what, const char *s, size_t len, size_t max_len);
/* a name (queue, partition, namespace...): not empty, and the text rule within QS_NAME_MAX */
extern const char *qs_name_problem(const char *name);
extern void qs_check_name(const char *kind, const char *item, const char *name);
extern const char *qs_new_name_problem(const char *name);
extern const char *qs_new_name_detail(const char *why);
extern void qs_check_new_name(const char *kind, const char *item, const char *name);

#endif							/* QS_TEXT_H */
