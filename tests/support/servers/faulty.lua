-- Serves @ROOT@/<name> for /faulty/<name>, honouring a single "Range: bytes=a-b", and fails
-- requests as S3 and networks fail, deterministically so that a test cannot fail by chance and
-- any failure replays: with ?faults=K1,K2,... the n-th request for this URI (path and query,
-- counted across nginx workers) fails in way Kn, and every later one is served. The ways:
--   slowdown  503 SlowDown (S3's XML error document)
--   500       500 Internal Server Error
--   truncate  the whole length promised, half of it sent, then the connection closed
--   stall     half the body, then nothing for 5 s (longer than the client's stall deadline), closed
--   slow      the first byte after 5 s (longer than the client's first-byte deadline), then served
--   reset     the headers, then the connection dropped
-- A test that repeats within one nginx adds a query parameter of its own to start a fresh count.
local root = ngx.var.document_root
local name = ngx.var.uri:sub(9)
local f = io.open(root .. "/" .. name, "rb")
if not f then
  ngx.status = 404
  ngx.print("no such object")
  return ngx.exit(404)
end
local body = f:read("*a")
f:close()

local first, last = 0, #body - 1
local range = ngx.var.http_range
local status = 200
if range then
  local a, b = range:match("^bytes=(%d+)-(%d*)$")
  if a then
    first = tonumber(a)
    if b ~= "" then last = math.min(tonumber(b), #body - 1) end
    status = 206
    ngx.header["Content-Range"] = "bytes " .. first .. "-" .. last .. "/" .. #body
  end
end
local part = body:sub(first + 1, last + 1)
ngx.header["ETag"] = '"' .. ngx.md5(body) .. '"'

-- Answers that are well formed but wrong (query ?wrong=): "short" serves the first half of the
-- range asked, saying so in Content-Range; "zero" serves the range's length from offset 0 and
-- says so; "etag" gives each answer another ETag and ignores If-Match, as an object overwritten
-- during the fetch on a server that does not honour If-Match.
local wrong = ngx.var.arg_wrong
if wrong and status == 206 then
  if wrong == "short" then
    last = first + math.floor((last - first + 1) / 2) - 1
  elseif wrong == "zero" then
    last, first = last - first, 0
  end
  part = body:sub(first + 1, last + 1)
  ngx.header["Content-Range"] = "bytes " .. first .. "-" .. last .. "/" .. #body
end
if wrong == "etag" then
  ngx.header["ETag"] = '"' .. ngx.md5(tostring(ngx.now()) .. math.random()) .. '"'
end

local fault
if ngx.var.arg_faults then
  local n = ngx.shared.faults:incr(ngx.var.request_uri, 1, 0)
  local i = 0
  for kind in ngx.var.arg_faults:gmatch("[^,]+") do
    i = i + 1
    if i == n then fault = kind end
  end
end
if fault == "slowdown" then
  ngx.status = 503
  ngx.header["Content-Type"] = "application/xml"
  ngx.print('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>' ..
            '<Message>Please reduce your request rate.</Message></Error>')
  return ngx.exit(503)
elseif fault == "500" then
  ngx.status = 500
  ngx.print("internal error")
  return ngx.exit(500)
elseif fault == "truncate" or fault == "stall" then
  ngx.status = status
  ngx.header["Content-Length"] = #part
  ngx.print(part:sub(1, math.floor(#part / 2)))
  ngx.flush(true)
  if fault == "stall" then ngx.sleep(5) end
  return ngx.exit(444)
elseif fault == "slow" then
  ngx.sleep(5)
elseif fault == "reset" then
  ngx.status = status
  ngx.header["Content-Length"] = #part
  ngx.send_headers()
  ngx.flush(true)
  return ngx.exit(444)
elseif fault then
  ngx.status = 400
  ngx.print("unknown fault kind '" .. fault .. "'")
  return ngx.exit(400)
end
ngx.status = status
ngx.header["Content-Length"] = #part
ngx.print(part)
