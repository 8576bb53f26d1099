/*
 * common.h: every header of src/common at once, for branches written before
 * the split; new code includes base.h and the headers it uses instead.
 */
#ifndef QS_COMMON_H
#define QS_COMMON_H

#include "common/base.h"
#include "common/args.h"
#include "common/guc.h"
#include "common/hooks.h"
#include "common/ids.h"
#include "common/json.h"
#include "common/jwt.h"
#include "common/spi.h"
#include "common/text.h"
#include "common/workers.h"

#endif							/* QS_COMMON_H */
