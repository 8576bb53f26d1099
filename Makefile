# queen_streams: PGXS build. `scripts/test.sh` and `scripts/run.sh` wrap it.
EXTENSION = queen_streams
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = $(EXTENSION)
OBJS = \
	src/queen_streams.o \
	src/common/args.o \
	src/common/guc.o \
	src/common/hooks.o \
	src/common/json_out.o \
	src/common/jwt.o \
	src/common/json_in.o \
	src/common/spi_plan.o \
	src/common/subxact.o \
	src/common/tenant.o \
	src/common/uuid7.o \
	src/http/daemon.o \
	src/http/limits.o \
	src/http/metrics.o \
	src/http/router.o \
	src/http/routes.o \
	src/http/routes_admin.o \
	src/http/routes_api.o \
	src/http/routes_queue.o \
	src/http/routes_streams.o \
	src/http/screen.o \
	src/http/settings.o \
	src/http/shmem.o \
	src/http/worker.o \
	src/storage/codec.o \
	src/storage/configure.o \
	src/storage/groups.o \
	src/storage/dedup.o \
	src/storage/encryption.o \
	src/storage/allocator.o \
	src/storage/push.o \
	src/storage/pop.o \
	src/storage/ack.o \
	src/storage/transaction.o \
	src/storage/dlq.o \
	src/storage/traces.o \
	src/storage/lease.o \
	src/storage/maintenance.o \
	src/storage/retention.o \
	src/storage/resources.o \
	src/storage/dashboard.o \
	src/storage/messages.o \
	src/storage/message_get.o \
	src/streams/cycle.o \
	src/streams/register.o \
	src/streams/state.o \
	src/streams/status.o

# Releases: each version's install script is frozen once released
# (sql/queen_streams--0.1.0.sql). A release's changes are the fragments in
# sql/<version>/, applied in name order; they make the upgrade script from the
# previous release, and the install script is the previous one plus that
# upgrade, so a fresh install and an upgraded one run the same statements.
UPGRADE_0_2_0 = $(sort $(wildcard sql/0.2.0/*.sql))
DATA_built = sql/$(EXTENSION)--0.1.0--0.2.0.sql sql/$(EXTENSION)--0.2.0.sql
DATA = sql/$(EXTENSION)--0.1.0.sql

PG_CPPFLAGS = -I$(srcdir)/src -DQS_VERSION=\"$(EXTVERSION)\"
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
# Our own CI builds warning-free (scripts/test.sh sets it); other compilers
# may warn where gcc 12 does not, so it is not forced on everyone.
ifdef QS_WERROR
PG_CFLAGS += -Werror
endif
SHLIB_LINK = -lzstd -lxxhash -lcrypto -lmicrohttpd

# pg_regress and the isolation tester each start a throwaway instance with the
# library preloaded (pg_cron's pattern); TAP tests start their own clusters.
REGRESS = $(patsubst test/sql/%.sql,%,$(sort $(wildcard test/sql/*.sql)))
REGRESS_OPTS = --inputdir=test --temp-instance=tmp_regress \
	--temp-config=test/queen_streams.conf
ISOLATION = $(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --outputdir=output_iso --temp-instance=tmp_isolation \
	--temp-config=test/queen_streams.conf

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: rebuild everything when a header changes.
$(OBJS): $(wildcard src/*/*.h)

sql/$(EXTENSION)--0.1.0--0.2.0.sql: $(UPGRADE_0_2_0)
	( printf '%s\n' '\echo Use "ALTER EXTENSION queen_streams UPDATE TO '"'"'0.2.0'"'"'" to load this file. \quit'; \
	  for f in $^; do printf '%s\n' "-- $$f"; sed '/^\\echo /d' $$f; done ) > $@

sql/$(EXTENSION)--0.2.0.sql: sql/$(EXTENSION)--0.1.0.sql sql/$(EXTENSION)--0.1.0--0.2.0.sql
	( cat sql/$(EXTENSION)--0.1.0.sql; sed '/^\\echo /d' sql/$(EXTENSION)--0.1.0--0.2.0.sql ) > $@

# TAP tests live in test/t (pgvector's layout); PGXS's own target expects t/.
prove_installcheck:
	rm -rf $(CURDIR)/tmp_check
	cd $(srcdir) && TESTDIR='$(CURDIR)' PATH="$(bindir):$$PATH" PGPORT='6$(DEF_PGPORT)' \
		PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
		$(PROVE) $(PG_PROVE_FLAGS) $(PROVE_FLAGS) $(or $(PROVE_TESTS),test/t/*.pl)

.PHONY: prove_installcheck
