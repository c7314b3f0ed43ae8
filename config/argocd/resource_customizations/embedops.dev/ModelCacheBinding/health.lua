-- Health of an embedops.dev ModelCacheBinding from status.phase (Active ->
-- Retiring -> Released) and the ConfigurationDrift condition.
local function condition(status, conditionType)
  if status == nil or status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == conditionType then
      return c
    end
  end
  return nil
end

local hs = {}
if obj.status == nil or obj.status.phase == nil or obj.status.phase == "" then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to record the phase"
  return hs
end

local drift = condition(obj.status, "ConfigurationDrift")
if drift ~= nil and drift.status == "True" then
  hs.status = "Degraded"
  if drift.message ~= nil and drift.message ~= "" then
    hs.message = drift.message
  else
    hs.message = "The cluster no longer matches the recorded decision"
  end
  return hs
end

local phase = obj.status.phase
if phase == "Active" then
  hs.status = "Healthy"
  hs.message = "Active"
  return hs
end
if phase == "Retiring" then
  hs.status = "Progressing"
  hs.message = "Retiring: releasing the cache claims"
  return hs
end
if phase == "Released" then
  hs.status = "Healthy"
  hs.message = "released"
  return hs
end

hs.status = "Unknown"
hs.message = "Unknown phase " .. tostring(phase)
return hs
