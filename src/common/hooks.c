/*
 * hooks.c: what a lower layer tells a higher one. The layers depend one
 * way (common -> storage -> streams -> http); where storage must reach the
 * listener (a push committed: wake its long-poll pops, count it), it calls
 * a hook that the higher layer set at load time, never its header.
 */
#include "common/hooks.h"

QsPushedHook qs_pushed_hook = NULL;
QsStreamedHook qs_streamed_hook = NULL;
QsDeletedHook qs_deleted_hook = NULL;
