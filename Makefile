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
	src/common/shmem_parts.o \
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
	src/http/dashboard_assets.o \
	src/http/pattern.o \
	src/http/request.o \
	src/http/settings.o \
	src/http/shmem.o \
	src/http/wake.o \
	src/http/dispatch/answer.o \
	src/http/dispatch/cells.o \
	src/http/dispatch/execute.o \
	src/http/dispatch/group.o \
	src/http/dispatch/gauges_snapshot.o \
	src/http/dispatch/metrics.o \
	src/http/dispatch/metrics_gauges.o \
	src/http/dispatch/metrics_text.o \
	src/http/dispatch/parked.o \
	src/http/dispatch/role.o \
	src/http/dispatch/router.o \
	src/http/dispatch/routes.o \
	src/http/dispatch/routes_admin.o \
	src/http/dispatch/routes_api.o \
	src/http/dispatch/routes_dashboard.o \
	src/http/dispatch/routes_queue.o \
	src/http/dispatch/routes_streams.o \
	src/http/dispatch/samples.o \
	src/http/transport/daemon.o \
	src/http/transport/limits.o \
	src/http/transport/screen.o \
	src/http/transport/worker.o \
	src/storage/codec.o \
	src/storage/configure.o \
	src/storage/groups.o \
	src/storage/groups_seek.o \
	src/storage/dedup.o \
	src/storage/dedup_fallback.o \
	src/storage/dedup_index.o \
	src/storage/dedup_own.o \
	src/storage/dedup_policy.o \
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
	src/storage/guc.o \
	src/storage/resources.o \
	src/storage/dashboard.o \
	src/storage/queue_stats.o \
	src/storage/messages.o \
	src/storage/message_get.o \
	src/streams/cycle.o \
	src/streams/declare.o \
	src/streams/definition.o \
	src/streams/guc.o \
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
QS_VERSIONS = 0.1.0 0.2.0 0.3.0 0.4.0 0.5.0 0.6.0 0.7.0 0.8.0
# The router's upgrade scripts are written by hand; its install scripts are
# built the same way.
ROUTER = queen_streams_router
ROUTER_VERSIONS = 0.1.0 0.2.0 0.3.0 0.4.0 0.5.0
# "previous:next" for each release of a list of versions
qs_steps = $(join $(filter-out $(lastword $(1)),$(1)),$(addprefix :,$(wordlist 2,$(words $(1)),$(1))))
qs_prev = $(word 1,$(subst :, ,$(1)))
qs_next = $(word 2,$(subst :, ,$(1)))
DATA_built = $(foreach s,$(call qs_steps,$(QS_VERSIONS)),sql/$(QS)--$(subst :,--,$(s)).sql sql/$(QS)--$(call qs_next,$(s)).sql) \
	$(foreach s,$(call qs_steps,$(ROUTER_VERSIONS)),sql/$(ROUTER)--$(call qs_next,$(s)).sql)
DATA = sql/$(QS)--0.1.0.sql sql/$(ROUTER)--0.1.0.sql \
	$(foreach s,$(call qs_steps,$(ROUTER_VERSIONS)),sql/$(ROUTER)--$(subst :,--,$(s)).sql)

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
$(OBJS): $(wildcard src/*/*.h src/*/*/*.h)

# A release's upgrade script ($(1) to $(2)): its fragments in name order
# (the folder too: a fragment moved away must rebuild the script).
define qs_upgrade_rule
sql/$(QS)--$(1)--$(2).sql: $$(sort $$(wildcard sql/$(2)/*.sql)) sql/$(2)
	( printf '%s\n' '\echo Use "ALTER EXTENSION queen_streams UPDATE TO '"'"'$(2)'"'"'" to load this file. \quit'; \
	  for f in $$(sort $$(wildcard sql/$(2)/*.sql)); do printf '%s\n' "-- $$$$f"; sed '/^\\echo /d' $$$$f; done ) > $$@
endef

# An install script of extension $(1) at $(3): the one of $(2) plus the upgrade.
define qs_install_rule
sql/$(1)--$(3).sql: sql/$(1)--$(2).sql sql/$(1)--$(2)--$(3).sql
	( cat sql/$(1)--$(2).sql; sed '/^\\echo /d' sql/$(1)--$(2)--$(3).sql ) > $$@
endef

$(foreach s,$(call qs_steps,$(QS_VERSIONS)),\
	$(eval $(call qs_upgrade_rule,$(call qs_prev,$(s)),$(call qs_next,$(s)))) \
	$(eval $(call qs_install_rule,$(QS),$(call qs_prev,$(s)),$(call qs_next,$(s)))))
$(foreach s,$(call qs_steps,$(ROUTER_VERSIONS)),\
	$(eval $(call qs_install_rule,$(ROUTER),$(call qs_prev,$(s)),$(call qs_next,$(s)))))

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
