# idempotent_pay — built with PGXS.  `test/run check` is the way to test it
# on a fresh machine.  Against a server of your own (PGHOST/PGPORT, as a
# superuser, after make install): `make installcheck` runs the pg_regress and
# isolation suites, `make prove_installcheck` the TAP tests.

PG_CONFIG ?= pg_config

EXTENSION = idempotent_pay
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = idempotent_pay
OBJS = \
	src/idempotent_pay.o \
	src/settings.o \
	src/api_args.o \
	src/api_claim.o \
	src/api_refund.o \
	src/api_settle.o \
	src/api_batch.o \
	src/api_archive.o \
	src/api_lookup.o \
	src/bizno.o \
	src/lifecycle.o \
	src/ddl.o \
	src/route.o \
	src/proxied.o \
	src/stats.o \
	src/machine.o \
	src/reason.o \
	src/amount.o \
	src/currency.o \
	src/bizno_format.o \
	src/prefixes.o \
	src/refund.o \
	src/card.o \
	src/api_card.o \
	src/write_card.o \
	src/trigger_common.o \
	src/trigger_guard.o \
	src/trigger_bookkeeping.o \
	src/trigger_journal.o \
	src/trigger_archive.o \
	src/write.o \
	src/write_sql.o \
	src/write_direct.o \
	src/write_direct_policy.o \
	src/write_indexes.o \
	src/write_archive.o \
	src/archive_keys.o \
	src/catalog.o

# idempotent_pay_proxy, the API routed over PL/Proxy, is a
# second extension served by the same library (src/route.c): its control
# file and script are installed as data next to idempotent_pay's.
PROXY_EXTENSION = idempotent_pay_proxy

DATA = $(wildcard sql/$(EXTENSION)--*.sql) \
	$(PROXY_EXTENSION).control $(wildcard sql/$(PROXY_EXTENSION)--*.sql)

REGRESS = setup bizno machine ledger claim half_open protect security hardening direct lifecycle fuzz reconcile refund archive seams ddl replica_mode write_policy claim_durable lookup verify params keys batch card upgrade version13
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION)

ISOLATION = begin-begin-new begin-begin-failed begin-succeed succeed-fail open-open notify schema-change refund-limit probe-lock journal-invalidated archive-claim index-ready archive-get issued-prefix batch-race card-capture-capture card-capture-void card-capture-expiry card-final-capture card-increment-capture card-refund-refund card-late-success card-held-meanwhile
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=$(EXTENSION)
# isolationtester runs under this launcher, and its connections read
# PGOPTIONS: every session of the specs allows claims inside transaction
# blocks, which they interleave on purpose before committing (regress
# claim_durable tests the refusal), and accepts keys of another system, as
# the specs key their payments by ids of their own ('NEW-1'; regress keys
# tests the refusal).
ISOLATION_OPTS += --launcher='env PGOPTIONS="-cidempotent_pay.claim_in_transaction=allow -cidempotent_pay.foreign_keys=accept"'

PG_CFLAGS += -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers

EXTRA_CLEAN = results output_iso regression.diffs regression.out

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# A release archive named for the control file's default_version.
.PHONY: dist
dist:
	git archive --format zip --prefix=$(EXTENSION)-$(EXTVERSION)/ --output $(EXTENSION)-$(EXTVERSION).zip HEAD

# The TAP tests of test/tap start clusters of their own: run them as a user
# PostgreSQL runs as, with Perl's IPC::Run (Debian: libipc-run-perl).
PROVE_TESTS = $(sort $(wildcard test/tap/*.pl))
.PHONY: prove_installcheck
prove_installcheck:
	$(prove_installcheck)
