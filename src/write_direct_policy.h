/*-------------------------------------------------------------------------
 *
 * write_direct_policy.h
 *	  Whether a write may go straight through the access methods
 *	  (write_direct.c) or must take the planned SQL path (write_sql.c):
 *	  decided here alone, from the tables as they are and the session.
 *
 *-------------------------------------------------------------------------
 */
#ifndef PAY_WRITE_DIRECT_POLICY_H
#define PAY_WRITE_DIRECT_POLICY_H

#include "postgres.h"

#include "fmgr.h"
#include "nodes/execnodes.h"
#include "nodes/nodes.h"
#include "utils/relcache.h"

#include "catalog.h"

/* What evaluating an expression may do. */
typedef enum PayExpressionKind
{
	PAY_EXPRESSION_PLAIN,		/* cannot depend on search_path */
	PAY_EXPRESSION_BUILT_IN,	/* built-in functions only; may look names up */
	PAY_EXPRESSION_FOREIGN		/* calls an SQL or procedural function */
} PayExpressionKind;

/*
 * The verdict on the tables for one catalog generation, and what direct
 * writes keep while it stands (in context, emptied when it is worked out
 * again).
 */
typedef struct PayDirectPolicy
{
	uint64		generation;		/* the catalog's it was worked out for */
	MemoryContext context;
	/*
	 * What the API's direct writes of ledger rows would evaluate: FOREIGN
	 * when they may not be made, BUILT_IN when they pin search_path.
	 */
	PayExpressionKind ledger_kind;
	/* may journal rows go straight into heap and indexes? (for the ledger's verdict) */
	bool		journal_direct;
	/* what an INSERT fills in for the columns it does not name, by attnum-1 */
	Expr	  **ledger_defaults;

	/* kept by write_direct.c: the ledger's trigger functions as it fires them */
	int			ntriggers;
	int			trigger_capacity;
	Oid		   *trigger_oids;
	FmgrInfo   *trigger_functions;
	/* the defaults ready to evaluate, and the domain checks' caches */
	ExprState **default_states;
	void	   *amount_domain_cache;
	void	   *currency_domain_cache;
} PayDirectPolicy;

extern PayDirectPolicy *PayDirectPolicyGet(FunctionCallInfo fcinfo);
extern bool PayDirectLedgerWriteAllowed(const PayDirectPolicy *policy, const PayCatalog *catalog,
										CmdType operation, Relation locked);
extern bool PayDirectLedgerReadAllowed(const PayDirectPolicy *decided, const PayCatalog *current,
									   Relation locked);
extern bool PayDirectJournalAppendAllowed(const PayCatalog *current, Relation journal);

#endif							/* PAY_WRITE_DIRECT_POLICY_H */
