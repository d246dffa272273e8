-- On-time performance per carrier in the slot's window (the day before the slot).
SELECT carrier,
       count(*) AS flights,
       count_if(arr_delay <= CAST(:on_time_delay_min AS double)) AS on_time_arrivals,
       round(100.0 * count_if(arr_delay <= CAST(:on_time_delay_min AS double))
             / nullif(count_if(arr_delay IS NOT NULL), 0), 1) AS on_time_pct,
       count_if(dep_time IS NULL) AS cancelled
FROM flights
WHERE sched_dep_utc >= CAST(:window_start AS timestamp)
  AND sched_dep_utc < CAST(:window_end AS timestamp)
  -- Partition pruning: only the window's UTC days are read (whole days, so the timestamp filter above stays).
  AND dt BETWEEN :window_first_date AND :window_last_date
GROUP BY carrier
ORDER BY carrier
