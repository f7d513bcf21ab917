-- Argo CD health check for serving.vllmop.io/VLLMService (Lua 5.1, as Argo CD runs it).
--
-- Progressing while the operator has not reported on the current spec (no status yet, or
-- status.observedGeneration behind metadata.generation): conditions from an older spec say
-- nothing about this one. Then Degraded=True wins (the service cannot get Ready on its own),
-- Ready=True is Healthy, and anything else (Progressing=True, or pods not ready yet) is
-- Progressing with the operator's own message.
local hs = {}

local function condition(conditions, type)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

local function said(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    if c.reason ~= nil and c.reason ~= "" then
      return c.reason .. ": " .. c.message
    end
    return c.message
  end
  return fallback
end

local status = obj.status
if status == nil or status.observedGeneration == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report status"
  return hs
end

local generation = obj.metadata.generation
if generation ~= nil and status.observedGeneration < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation
    .. " (it reported on " .. status.observedGeneration .. ")"
  return hs
end

local degraded = condition(status.conditions, "Degraded")
if degraded ~= nil and degraded.status == "True" then
  hs.status = "Degraded"
  hs.message = said(degraded, "Degraded")
  return hs
end

local ready = condition(status.conditions, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = said(ready, "Ready")
  return hs
end

local progressing = condition(status.conditions, "Progressing")
hs.status = "Progressing"
if progressing ~= nil and progressing.status == "True" then
  hs.message = said(progressing, "Rolling out")
else
  hs.message = said(ready, "Waiting for the Ready condition")
end
return hs
