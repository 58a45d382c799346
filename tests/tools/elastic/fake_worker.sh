#!/bin/bash
# A fake elastic worker for test_plaitrun_elastic_loop: speaks the test
# double's text protocol (rdv_double.c) through bash's /dev/tcp. $1: a folder
# where it writes pid.<host>_<slot> and reads the test's orders:
#   broken.<epoch>  the job of that epoch failed: come back (JOIN again)
#   added.<epoch>   ask the driver for host updates (POLL); rejoin on any
#   done            finish with status 0
#   deaf.<name>     (name with / as _) never come back after broken.<epoch>
dir=$1
name=${PLAIT_ELASTIC_WORKER:?no PLAIT_ELASTIC_WORKER}
[ -z "$PLAIT_RANK$PLAIT_SIZE$PLAIT_RENDEZVOUS" ] || { echo "fixed layout in elastic mode"; exit 5; }
[ -n "$PLAIT_SECRET" ] || { echo "no secret"; exit 6; }
host=${PLAIT_ELASTIC_DRIVER%:*}
port=${PLAIT_ELASTIC_DRIVER##*:}
echo $$ > "$dir/pid.${name/\//_}"
echo "hello from $name secret ${PLAIT_SECRET:0:4}"
epoch=0
while :; do
  exec 3<>"/dev/tcp/$host/$port" || exit 3
  echo "JOIN $name $epoch 127.0.0.1:1" >&3
  read -r kind e rank size rest <&3
  exec 3<&-
  if [ "$kind" = STOP ]; then echo "stopped: $e $rank $size $rest"; exit 0; fi
  [ "$kind" = ASSIGN ] || exit 4
  epoch=$e
  echo "epoch $e rank $rank size $size"
  while :; do
    [ -e "$dir/done" ] && exit 0
    [ -e "$dir/broken.$epoch" ] && [ ! -e "$dir/deaf.${name/\//_}" ] && break
    if [ -e "$dir/added.$epoch" ]; then
      exec 3<>"/dev/tcp/$host/$port" || exit 3
      echo POLL >&3
      read -r _ ts bits <&3
      exec 3<&-
      [ "$bits" != 0 ] && break
    fi
    sleep 0.1
  done
done
