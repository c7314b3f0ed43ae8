-- Health of an embedops.dev EmbeddingServer from its kstatus conditions
-- (Ready, Reconciling, Stalled) and status.observedGeneration.
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

local function messageOf(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

local hs = {}
if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "Reconciliation is suspended"
  return hs
end

local generation = nil
if obj.metadata ~= nil then
  generation = obj.metadata.generation
end
if obj.status == nil or obj.status.observedGeneration == nil
    or (generation ~= nil and obj.status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to observe the change"
  return hs
end

local stalled = condition(obj.status, "Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = messageOf(stalled, "Reconciliation is stalled")
  return hs
end

-- Pods waiting on a node, an image or a crash loop (Ready=False with the
-- pods' reason) are progress until the server's spec.progressDeadline, as
-- a Deployment's are until its progressDeadlineSeconds: the controller
-- reports them with Reconciling=True, then with Stalled=True once the
-- deadline passes without progress.
local reconciling = condition(obj.status, "Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = messageOf(reconciling, "Reconciliation is in progress")
  return hs
end

local ready = condition(obj.status, "Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = messageOf(ready, "Ready")
  return hs
end
if ready ~= nil and ready.status == "False" then
  hs.status = "Degraded"
  hs.message = messageOf(ready, "Not ready")
  return hs
end

hs.status = "Progressing"
hs.message = "Waiting for the Ready condition"
return hs
