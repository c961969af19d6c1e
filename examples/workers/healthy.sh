#!/bin/sh
# A healthy worker: takes a job every two seconds, forever.
i=0
while :; do
	i=$((i + 1))
	echo "worker $TEND_ID: job $i done"
	sleep 2
done
