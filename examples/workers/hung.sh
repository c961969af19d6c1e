#!/bin/sh
# Works for a while, then hangs without a word (a deadlock, a stuck network
# call): its idle_output_timeout catches it as wedged.
for i in 1 2 3; do
	echo "hung: step $i"
	sleep 1
done
echo "hung: waiting on something that never comes"
exec sleep 100000
