#!/bin/sh
# Demo step: records what it was asked to do and the context failoverd passed.
echo "$(date +%T) [$FAILOVER_PHASE plan $FAILOVER_PLAN_ID, $FAILOVER_FROM -> $FAILOVER_TO] $*" >> "$(dirname "$0")/steps.log"
