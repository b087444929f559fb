-- Serves @ROOT@/<name> for /faulty/<name>, honouring a single "Range: bytes=a-b", and fails a
-- fraction of requests (query ?p=, default 0.1; 0 with ?wrong=, below) as S3 and networks fail:
--   503 SlowDown (XML), 500, connection closed mid-body (truncation), stall mid-body,
--   slow first byte, and a reset right after the headers.
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

-- Answers that are well formed but wrong (query ?wrong=, never at random): "short" serves the
-- first half of the range asked, saying so in Content-Range; "zero" serves the range's length
-- from offset 0 and says so; "etag" gives each answer another ETag and ignores If-Match, as an
-- object overwritten during the fetch on a server that does not honour If-Match.
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

local p = tonumber(ngx.var.arg_p) or (wrong and 0 or 0.1)
if math.random() < p then
  local kind = math.random(6)
  if kind == 1 then
    ngx.status = 503
    ngx.header["Content-Type"] = "application/xml"
    ngx.print('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>' ..
              '<Message>Please reduce your request rate.</Message></Error>')
    return ngx.exit(503)
  elseif kind == 2 then
    ngx.status = 500
    ngx.print("internal error")
    return ngx.exit(500)
  elseif kind == 3 then  -- truncated: promise the whole part, send half, close
    ngx.status = status
    ngx.header["Content-Length"] = #part
    ngx.print(part:sub(1, math.floor(#part / 2)))
    ngx.flush(true)
    return ngx.exit(444)
  elseif kind == 4 then  -- stall: half, then nothing for longer than the client's patience
    ngx.status = status
    ngx.header["Content-Length"] = #part
    ngx.print(part:sub(1, math.floor(#part / 2)))
    ngx.flush(true)
    ngx.sleep(5)
    return ngx.exit(444)
  elseif kind == 5 then  -- slow first byte
    ngx.sleep(5)
  else  -- headers, then the connection drops
    ngx.status = status
    ngx.header["Content-Length"] = #part
    ngx.send_headers()
    ngx.flush(true)
    return ngx.exit(444)
  end
end
ngx.status = status
ngx.header["Content-Length"] = #part
ngx.print(part)
