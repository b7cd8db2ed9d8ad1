-- Every request a distinct question (a distinct visitor age), so every check misses the
-- findings cache. `wrk ... -s bench/distinct.lua URL -- OFFSET`: ages start above OFFSET, so
-- runs against one server do not repeat each other's questions.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-test-master-key-123456"
local n = 0
local offset = 66
function init(args)
  if args[1] then offset = tonumber(args[1]) end
end
function request()
  n = n + 1
  local body = string.format('{"model":"m","messages":[{"role":"user","content":"I am %d, low season, no credits. What is my fee after the senior discount?"}]}', offset + n)
  return wrk.format(nil, nil, nil, body)
end
