# queen_streams: PGXS build. `scripts/test.sh` and `scripts/run.sh` wrap it.
# Two extensions: queen_streams itself, and queen_streams_router, the SQL of
# a router database in front of cells (doc/deploying.md),
# which uses this library's C functions and no code of its own.
QS = queen_streams
EXTENSION = $(QS) queen_streams_router
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(QS).control)

MODULE_big = $(QS)
OBJS = \
	src/queen_streams.o \
	src/common/args.o \
	src/common/guc.o \
	src/common/heap.o \
	src/common/bgworkers.o \
	src/common/hooks.o \
	src/common/json_out.o \
	src/common/json_scan.o \
	src/common/jsonb_value.o \
	src/common/jwt.o \
	src/common/json_in.o \
	src/common/secret_file.o \
	src/common/spi_plan.o \
	src/common/subxact.o \
	src/common/tenant.o \
	src/common/text.o \
	src/common/uuid7.o \
	src/http/cells.o \
	src/http/daemon.o \
	src/http/group.o \
	src/http/limits.o \
	src/http/metrics.o \
	src/http/metrics_gauges.o \
	src/http/parked.o \
	src/http/pattern.o \
	src/http/router.o \
	src/http/role.o \
	src/http/routes.o \
	src/http/routes_admin.o \
	src/http/routes_api.o \
	src/http/routes_dashboard.o \
	src/http/dashboard_assets.o \
	src/http/samples.o \
	src/http/routes_queue.o \
	src/http/routes_streams.o \
	src/http/screen.o \
	src/http/settings.o \
	src/http/shmem.o \
	src/http/worker.o \
	src/storage/codec.o \
	src/storage/configure.o \
	src/storage/groups.o \
	src/storage/groups_seek.o \
	src/storage/dedup.o \
	src/storage/encryption.o \
	src/storage/allocator.o \
	src/storage/resolve.o \
	src/storage/row_lock.o \
	src/storage/segment_write.o \
	src/storage/push.o \
	src/storage/push_text.o \
	src/storage/pop.o \
	src/storage/pop_ready.o \
	src/storage/ack.o \
	src/storage/transaction.o \
	src/storage/dlq.o \
	src/storage/traces.o \
	src/storage/lease.o \
	src/storage/maintenance.o \
	src/storage/retention.o \
	src/storage/fence.o \
	src/storage/resources.o \
	src/storage/dashboard.o \
	src/storage/queue_stats.o \
	src/storage/messages.o \
	src/storage/message_get.o \
	src/streams/cycle.o \
	src/streams/declare.o \
	src/streams/definition.o \
	src/streams/pool.o \
	src/streams/register.o \
	src/streams/runner.o \
	src/streams/state.o \
	src/streams/status.o \
	src/streams/window.o

# Releases: each version's install script is frozen once released
# (sql/queen_streams--0.1.0.sql). A release's changes are the fragments in
# sql/<version>/, applied in name order; they make the upgrade script from the
# previous release, and the install script is the previous one plus that
# upgrade, so a fresh install and an upgraded one run the same statements.
UPGRADE_0_2_0 = $(sort $(wildcard sql/0.2.0/*.sql))
UPGRADE_0_3_0 = $(sort $(wildcard sql/0.3.0/*.sql))
UPGRADE_0_4_0 = $(sort $(wildcard sql/0.4.0/*.sql))
UPGRADE_0_5_0 = $(sort $(wildcard sql/0.5.0/*.sql))
UPGRADE_0_6_0 = $(sort $(wildcard sql/0.6.0/*.sql))
UPGRADE_0_7_0 = $(sort $(wildcard sql/0.7.0/*.sql))
UPGRADE_0_8_0 = $(sort $(wildcard sql/0.8.0/*.sql))
DATA_built = sql/$(QS)--0.1.0--0.2.0.sql sql/$(QS)--0.2.0.sql \
	sql/$(QS)--0.2.0--0.3.0.sql sql/$(QS)--0.3.0.sql \
	sql/$(QS)--0.3.0--0.4.0.sql sql/$(QS)--0.4.0.sql \
	sql/$(QS)--0.4.0--0.5.0.sql sql/$(QS)--0.5.0.sql \
	sql/$(QS)--0.5.0--0.6.0.sql sql/$(QS)--0.6.0.sql \
	sql/$(QS)--0.6.0--0.7.0.sql sql/$(QS)--0.7.0.sql \
	sql/$(QS)--0.7.0--0.8.0.sql sql/$(QS)--0.8.0.sql \
	sql/queen_streams_router--0.2.0.sql sql/queen_streams_router--0.3.0.sql \
	sql/queen_streams_router--0.4.0.sql sql/queen_streams_router--0.5.0.sql
DATA = sql/$(QS)--0.1.0.sql sql/queen_streams_router--0.1.0.sql \
	sql/queen_streams_router--0.1.0--0.2.0.sql sql/queen_streams_router--0.2.0--0.3.0.sql \
	sql/queen_streams_router--0.3.0--0.4.0.sql sql/queen_streams_router--0.4.0--0.5.0.sql

PG_CPPFLAGS = -I$(srcdir)/src -DQS_VERSION=\"$(EXTVERSION)\"
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
# Our own CI builds warning-free (scripts/test.sh sets it); other compilers
# may warn where gcc 12 does not, so it is not forced on everyone.
ifdef QS_WERROR
PG_CFLAGS += -Werror
endif
SHLIB_LINK = -lzstd -lxxhash -lcrypto -lmicrohttpd

# pg_regress reads sql/ and expected/ (PGXS's default), skipping the
# extension's own scripts; the isolation specs live in test/specs with their
# outputs in test/expected. `make installcheck` runs both against the server
# PGHOST/PGPORT name, which must preload the library (scripts/run.sh's does).
# scripts/test.sh sets QS_TEMP_INSTANCE=1 to run them on throwaway instances
# instead (pg_cron's pattern); TAP tests always start their own clusters.
REGRESS = $(filter-out $(addsuffix --%,$(EXTENSION)),$(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql))))
REGRESS_OPTS =
ISOLATION = $(patsubst test/specs/%.spec,%,$(sort $(wildcard test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test --outputdir=output_iso
ifdef QS_TEMP_INSTANCE
REGRESS_OPTS += --temp-instance=tmp_regress --temp-config=test/queen_streams.conf
ISOLATION_OPTS += --temp-instance=tmp_isolation --temp-config=test/queen_streams.conf
endif

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks no header dependencies: rebuild everything when a header changes.
$(OBJS): $(wildcard src/*/*.h)

# (the folder too: a fragment moved away must rebuild the script)
sql/$(QS)--0.1.0--0.2.0.sql: $(UPGRADE_0_2_0) sql/0.2.0
	( printf '%s\n' '\echo Use "ALTER EXTENSION queen_streams UPDATE TO '"'"'0.2.0'"'"'" to load this file. \quit'; \
	  for f in $(UPGRADE_0_2_0); do printf '%s\n' "-- $$f"; sed '/^\\echo /d' $$f; done ) > $@

sql/$(QS)--0.2.0.sql: sql/$(QS)--0.1.0.sql sql/$(QS)--0.1.0--0.2.0.sql
	( cat sql/$(QS)--0.1.0.sql; sed '/^\\echo /d' sql/$(QS)--0.1.0--0.2.0.sql ) > $@

# (the folder too: a fragment moved away must rebuild the script)
sql/$(QS)--0.2.0--0.3.0.sql: $(UPGRADE_0_3_0) sql/0.3.0
	( printf '%s\n' '\echo Use "ALTER EXTENSION queen_streams UPDATE TO '"'"'0.3.0'"'"'" to load this file. \quit'; \
	  for f in $(UPGRADE_0_3_0); do printf '%s\n' "-- $$f"; sed '/^\\echo /d' $$f; done ) > $@

sql/$(QS)--0.3.0.sql: sql/$(QS)--0.2.0.sql sql/$(QS)--0.2.0--0.3.0.sql
	( cat sql/$(QS)--0.2.0.sql; sed '/^\\echo /d' sql/$(QS)--0.2.0--0.3.0.sql ) > $@

# (the folder too: a fragment moved away must rebuild the script)
sql/$(QS)--0.3.0--0.4.0.sql: $(UPGRADE_0_4_0) sql/0.4.0
	( printf '%s\n' '\echo Use "ALTER EXTENSION queen_streams UPDATE TO '"'"'0.4.0'"'"'" to load this file. \quit'; \
	  for f in $(UPGRADE_0_4_0); do printf '%s\n' "-- $$f"; sed '/^\\echo /d' $$f; done ) > $@

sql/$(QS)--0.4.0.sql: sql/$(QS)--0.3.0.sql sql/$(QS)--0.3.0--0.4.0.sql
	( cat sql/$(QS)--0.3.0.sql; sed '/^\\echo /d' sql/$(QS)--0.3.0--0.4.0.sql ) > $@

# (the folder too: a fragment moved away must rebuild the script)
sql/$(QS)--0.4.0--0.5.0.sql: $(UPGRADE_0_5_0) sql/0.5.0
	( printf '%s\n' '\echo Use "ALTER EXTENSION queen_streams UPDATE TO '"'"'0.5.0'"'"'" to load this file. \quit'; \
	  for f in $(UPGRADE_0_5_0); do printf '%s\n' "-- $$f"; sed '/^\\echo /d' $$f; done ) > $@

sql/$(QS)--0.5.0.sql: sql/$(QS)--0.4.0.sql sql/$(QS)--0.4.0--0.5.0.sql
	( cat sql/$(QS)--0.4.0.sql; sed '/^\\echo /d' sql/$(QS)--0.4.0--0.5.0.sql ) > $@

# (the folder too: a fragment moved away must rebuild the script)
sql/$(QS)--0.5.0--0.6.0.sql: $(UPGRADE_0_6_0) sql/0.6.0
	( printf '%s\n' '\echo Use "ALTER EXTENSION queen_streams UPDATE TO '"'"'0.6.0'"'"'" to load this file. \quit'; \
	  for f in $(UPGRADE_0_6_0); do printf '%s\n' "-- $$f"; sed '/^\\echo /d' $$f; done ) > $@

sql/$(QS)--0.6.0.sql: sql/$(QS)--0.5.0.sql sql/$(QS)--0.5.0--0.6.0.sql
	( cat sql/$(QS)--0.5.0.sql; sed '/^\\echo /d' sql/$(QS)--0.5.0--0.6.0.sql ) > $@

sql/$(QS)--0.6.0--0.7.0.sql: $(UPGRADE_0_7_0) sql/0.7.0
	( printf '%s\n' '\echo Use "ALTER EXTENSION queen_streams UPDATE TO '"'"'0.7.0'"'"'" to load this file. \quit'; \
	  for f in $(UPGRADE_0_7_0); do printf '%s\n' "-- $$f"; sed '/^\\echo /d' $$f; done ) > $@

sql/$(QS)--0.7.0.sql: sql/$(QS)--0.6.0.sql sql/$(QS)--0.6.0--0.7.0.sql
	( cat sql/$(QS)--0.6.0.sql; sed '/^\\echo /d' sql/$(QS)--0.6.0--0.7.0.sql ) > $@

sql/$(QS)--0.7.0--0.8.0.sql: $(UPGRADE_0_8_0) sql/0.8.0
	( printf '%s\n' '\echo Use "ALTER EXTENSION queen_streams UPDATE TO '"'"'0.8.0'"'"'" to load this file. \quit'; \
	  for f in $(UPGRADE_0_8_0); do printf '%s\n' "-- $$f"; sed '/^\\echo /d' $$f; done ) > $@

sql/$(QS)--0.8.0.sql: sql/$(QS)--0.7.0.sql sql/$(QS)--0.7.0--0.8.0.sql
	( cat sql/$(QS)--0.7.0.sql; sed '/^\\echo /d' sql/$(QS)--0.7.0--0.8.0.sql ) > $@

# The router's: its 0.1.0 script plus each upgrade, written by hand.
sql/queen_streams_router--0.2.0.sql: sql/queen_streams_router--0.1.0.sql sql/queen_streams_router--0.1.0--0.2.0.sql
	( cat sql/queen_streams_router--0.1.0.sql; sed '/^\\echo /d' sql/queen_streams_router--0.1.0--0.2.0.sql ) > $@

sql/queen_streams_router--0.3.0.sql: sql/queen_streams_router--0.2.0.sql sql/queen_streams_router--0.2.0--0.3.0.sql
	( cat sql/queen_streams_router--0.2.0.sql; sed '/^\\echo /d' sql/queen_streams_router--0.2.0--0.3.0.sql ) > $@

sql/queen_streams_router--0.4.0.sql: sql/queen_streams_router--0.3.0.sql sql/queen_streams_router--0.3.0--0.4.0.sql
	( cat sql/queen_streams_router--0.3.0.sql; sed '/^\\echo /d' sql/queen_streams_router--0.3.0--0.4.0.sql ) > $@

sql/queen_streams_router--0.5.0.sql: sql/queen_streams_router--0.4.0.sql sql/queen_streams_router--0.4.0--0.5.0.sql
	( cat sql/queen_streams_router--0.4.0.sql; sed '/^\\echo /d' sql/queen_streams_router--0.4.0--0.5.0.sql ) > $@

# The dashboard's files, compiled in as byte arrays (xxd from the xxd package).
DASHBOARD_FILES = src/http/dashboard/index.html src/http/dashboard/app.js src/http/dashboard/app.css
EXTRA_CLEAN = src/http/dashboard_assets.c

src/http/dashboard_assets.c: $(DASHBOARD_FILES)
	( echo '/* generated by the Makefile from src/http/dashboard/: do not edit */'; \
	  for f in $^; do n=$$(basename $$f | tr '.-' '__'); \
	    echo "extern const unsigned char qs_dash_$$n[]; extern const unsigned int qs_dash_$$n""_len;"; \
	    echo "const unsigned char qs_dash_$$n[] = {"; xxd -i < $$f; echo "};"; \
	    echo "const unsigned int qs_dash_$$n""_len = sizeof(qs_dash_$$n);"; done ) > $@.tmp
	mv $@.tmp $@

# TAP tests live in test/t (pgvector's layout); PGXS's own target expects t/.
prove_installcheck:
	rm -rf $(CURDIR)/tmp_check
	cd $(srcdir) && TESTDIR='$(CURDIR)' PATH="$(bindir):$$PATH" PGPORT='6$(DEF_PGPORT)' \
		PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
		$(PROVE) $(PG_PROVE_FLAGS) $(PROVE_FLAGS) $(or $(PROVE_TESTS),test/t/*.pl)

.PHONY: prove_installcheck

# libFuzzer harnesses (clang; not part of the extension's build or CI's):
# `make fuzz` builds them in test/fuzz, `make fuzz-run FUZZ_TIME=20` runs
# each that long over its checked-in corpus.
fuzz:
	$(MAKE) -C test/fuzz PG_CONFIG=$(PG_CONFIG)

fuzz-run:
	$(MAKE) -C test/fuzz PG_CONFIG=$(PG_CONFIG) check $(if $(FUZZ_TIME),FUZZ_TIME=$(FUZZ_TIME))

.PHONY: fuzz fuzz-run

# The PGXN distribution: the committed tree of HEAD as name-version.zip
# (scripts/check-meta.pl ZIP checks it against META.json).
DISTNAME = $(QS)-$(EXTVERSION)
DISTFILE = $(DISTNAME).zip
dist:
	git -C $(srcdir) archive --format zip --prefix=$(DISTNAME)/ -o $(abspath $(DISTFILE)) HEAD
.PHONY: dist
