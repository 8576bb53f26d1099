/*
 * base.h: what every file of queen_streams starts from: postgres.h, and the
 * few constants every floor spells the same. The helpers of src/common each
 * have their header (args.h, guc.h, hooks.h, ids.h, json.h, jwt.h, spi.h,
 * text.h, workers.h): a file includes those it uses.
 */
#ifndef QS_BASE_H
#define QS_BASE_H

#include "postgres.h"

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#define QS_QUEUE_MODE "__QUEUE_MODE__"
#define QS_DEFAULT_TENANT_STR "00000000-0000-0000-0000-000000000001"
#define QS_UUID_STRLEN 36

#endif							/* QS_BASE_H */
