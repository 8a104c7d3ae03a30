# idempotent_pay — built with PGXS.  `test/run check` is the way to test it;
# `make installcheck` needs a running server (PGHOST/PGPORT).

PG_CONFIG ?= pg_config

EXTENSION = idempotent_pay
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = idempotent_pay
OBJS = \
	src/idempotent_pay.o \
	src/bizno.o \
	src/bizno_format.o \
	src/amount.o \
	src/currency.o \
	src/catalog.o \
	src/direct.o \
	src/machine.o \
	src/guard.o \
	src/journal.o \
	src/ledger.o \
	src/lifecycle.o \
	src/proxied.o \
	src/refund.o \
	src/route.o \
	src/stats.o

# idempotent_pay_proxy (SPEC section 13), the API routed over PL/Proxy, is a
# second extension served by the same library (src/route.c): its control
# file and script are installed as data next to idempotent_pay's.
PROXY_EXTENSION = idempotent_pay_proxy

DATA = $(wildcard sql/$(EXTENSION)--*.sql) \
	$(PROXY_EXTENSION).control $(wildcard sql/$(PROXY_EXTENSION)--*.sql)

REGRESS = setup bizno machine ledger claim half_open protect security hardening direct lifecycle fuzz reconcile refund upgrade version13
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION)

ISOLATION = begin-begin-new begin-begin-failed begin-succeed succeed-fail open-open notify schema-change refund-limit probe-lock
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=$(EXTENSION)

PG_CFLAGS += -Wall -Wextra -Werror -Wno-unused-parameter -Wno-missing-field-initializers

EXTRA_CLEAN = results output_iso regression.diffs regression.out

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# A release archive named for the control file's default_version.
.PHONY: dist
dist:
	git archive --format zip --prefix=$(EXTENSION)-$(EXTVERSION)/ --output $(EXTENSION)-$(EXTVERSION).zip HEAD
