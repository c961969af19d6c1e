#!/bin/sh
# An agent: a turn of output, then a quiet wait for the next task.
n=0
while :; do
	n=$((n + 1))
	echo "agent: turn $n: thinking"
	sleep 1
	echo "agent: turn $n: answered"
	sleep 12
done
