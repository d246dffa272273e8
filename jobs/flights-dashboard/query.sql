-- Departures per NYC airport in the slot's window: volume, delays, cancellations.
SELECT origin,
       count(*) AS flights,
       count_if(dep_delay > 15) AS delayed_departures,
       count_if(dep_time IS NULL) AS cancelled,
       round(avg(dep_delay), 2) AS avg_dep_delay_min,
       approx_percentile(arr_delay, 0.9) AS p90_arr_delay_min,
       max_by(dest, dep_delay) AS worst_delay_dest
FROM flights
WHERE sched_dep_utc >= CAST(:window_start AS timestamp)
  AND sched_dep_utc < CAST(:window_end AS timestamp)
  -- Partition pruning: only the window's UTC days are read (whole days, so the timestamp filter above stays).
  AND dt BETWEEN :window_first_date AND :window_last_date
GROUP BY origin
ORDER BY origin
