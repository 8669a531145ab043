--[[
wattsched submit gate (Slurm job_submit/lua plugin).

Holds every job entering a partition wattsched manages, so that only the wattsched
daemon starts them (it pins each job to the nodes it chose and releases it). The gate
is fail-open: it holds jobs only while the daemon's heartbeat is fresh, so a stopped or
dead daemon never leaves new jobs stuck.

Users are not trusted. While the heartbeat is fresh:
- every new job of a managed partition gets priority 0 (a hold) and the marker
  "wattsched:held" in its AdminComment, which users cannot set; that is how the daemon
  tells its own holds from an administrator's. Jobs submitted held (sbatch --hold) are
  gated too: Slurm records their hold as the user's (JobHeldUser), but the marker makes
  it wattsched's;
- a job moved into a managed partition (scontrol update partition=) from an unmanaged
  one is held in the same update. Slurm 22.05 refuses an AdminComment set by the plugin
  on a user's update (_update_job checks the user's rights again after the plugin), so
  a user's moved job is held without the marker; the daemon takes that hold over (marks
  it) at its next cycle;
- a user's release of any held pending job of a managed partition is refused.
Always (fresh heartbeat or not), a release of a marked held job by anyone but root and
admin_uids is refused: the job is wattsched's until the daemon releases it.

Install: JobSubmitPlugins=lua in slurm.conf, this file as job_submit.lua beside
slurm.conf, and wattsched-gate.conf beside it (all keys optional):

    heartbeat_file = /var/lib/wattsched/heartbeat   # written by the daemon each cycle
    max_age_s = 60                                   # older heartbeat: the gate is open
    partitions = batch,gpu                           # managed partitions; * for all
    default_partition = batch                        # partition of jobs that name none
                                                     # (default: the Default=YES one)
    admin_uids = 64030                               # may release gated jobs (root always)
--]]

local MARKER = "wattsched:held"

-- Slurm 22.05 discards slurm.log_user() in job_modify, so a refused release returns
-- ESLURM_JOB_HELD (2042 since 22.05; not exported to lua): scontrol then prints "Job is
-- in held state, pending scheduler release".
local ESLURM_JOB_HELD = 2042

local defaults = {
    heartbeat_file = "/var/lib/wattsched/heartbeat",
    max_age_s = 60,
    partitions = "*",
    default_partition = "",
    admin_uids = "",
}

local function script_dir()
    local source = debug.getinfo(1, "S").source or ""
    return source:match("^@(.*/)") or "/etc/slurm/"
end

local function trim(s)
    return (s:gsub("^%s+", ""):gsub("%s+$", ""))
end

local function read_conf()
    local conf = {}
    for k, v in pairs(defaults) do conf[k] = v end
    local f = io.open(script_dir() .. "wattsched-gate.conf", "r")
    if f == nil then return conf end
    for line in f:lines() do
        line = line:gsub("#.*$", "")
        local k, v = line:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
        if k ~= nil and defaults[k] ~= nil then conf[k] = v end
    end
    f:close()
    conf.max_age_s = tonumber(conf.max_age_s) or defaults.max_age_s
    return conf
end

-- Age of the daemon's heartbeat in seconds, or nil when there is none or it is unreadable.
local function heartbeat_age(path)
    local f = io.open(path, "r")
    if f == nil then return nil end
    local text = f:read("*l")
    f:close()
    local t = tonumber(text and trim(text) or "")
    if t == nil then return nil end
    return os.time() - t
end

-- The partition a job without one lands in: default_partition, else Slurm's Default=YES one.
local function default_partition(part_list, conf)
    if conf.default_partition ~= "" then return conf.default_partition end
    for name, part in pairs(part_list or {}) do
        if part.flag_default == 1 then return part.name or name end
    end
    return ""
end

local function managed(partition, conf, part_list)
    if partition == nil or partition == "" then partition = default_partition(part_list, conf) end
    if conf.partitions == "*" then return true end
    for p in string.gmatch(conf.partitions, "[^,%s]+") do
        -- a job may name several partitions: managed if any of them is
        for q in string.gmatch(partition or "", "[^,]+") do
            if p == q then return true end
        end
    end
    return false
end

local function fresh(conf)
    local age = heartbeat_age(conf.heartbeat_file)
    return age ~= nil and age <= conf.max_age_s and age >= -conf.max_age_s
end

local function marked(comment)
    for token in string.gmatch(comment or "", "%S+") do
        if token == MARKER then return true end
    end
    return false
end

local function with_marker(comment)
    if comment == nil or comment == "" then return MARKER end
    if marked(comment) then return comment end
    return comment .. " " .. MARKER
end

-- root and the admin uids of wattsched-gate.conf (the daemon runs as one of them)
local function is_admin(uid, conf)
    if uid == 0 then return true end
    for a in string.gmatch(conf.admin_uids or "", "%d+") do
        if tonumber(a) == uid then return true end
    end
    return false
end

-- A job submitted held by its user (priority 0) is gated like any other: otherwise its
-- owner's `scontrol release` would start it behind wattsched's back.
local function gate(job_desc, part_list)
    local conf = read_conf()
    if not managed(job_desc.partition, conf, part_list) then return end
    if not fresh(conf) then
        slurm.log_info("wattsched gate: heartbeat %s stale or missing, job of %s not held",
                       conf.heartbeat_file, tostring(job_desc.user_name))
        return
    end
    job_desc.priority = 0
    job_desc.admin_comment = with_marker(job_desc.admin_comment)
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    -- fail-open: an error in the gate must never reject or hold a job
    local ok, err = pcall(gate, job_desc, part_list)
    if not ok then
        slurm.log_error("wattsched gate: %s (job not held)", tostring(err))
    end
    return slurm.SUCCESS
end

-- What the gate does with a job update: nil (let it through), "refuse", or "hold" (the
-- update goes through with the job held). slurm_job_modify runs on every update,
-- including the daemon's own holds and releases (as root or an admin uid).
local function judge_modify(job_desc, job_rec, part_list, modify_uid)
    local conf = read_conf()
    if job_rec == nil then return nil end
    local admin = is_admin(modify_uid, conf)
    local prio = job_desc.priority
    local releases = prio ~= nil and prio ~= slurm.NO_VAL and prio ~= 0
    local held = job_rec.priority == 0
    -- a marked job is wattsched's until the daemon releases it, heartbeat or not
    if not admin and held and releases and marked(job_rec.admin_comment) then return "refuse" end
    if job_rec.job_state == nil or job_rec.job_state % 256 ~= 0 then return nil end  -- not pending
    local moved = job_desc.partition ~= nil and job_desc.partition ~= ""
    local partition = moved and job_desc.partition or job_rec.partition
    if not managed(partition, conf, part_list) then return nil end
    if moved and managed(job_rec.partition, conf, part_list) then moved = false end  -- stays managed
    if not releases and not moved then return nil end
    if not fresh(conf) then return nil end
    if moved then
        -- entering a managed partition: held, whatever the update also asked
        job_desc.priority = 0
        if admin then
            local comment = job_desc.admin_comment
            if comment == nil then comment = job_rec.admin_comment end
            job_desc.admin_comment = with_marker(comment)
        end
        return "hold"
    end
    if not admin and held then return "refuse" end  -- a user's release in a managed partition
    return nil
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    -- fail-open like the submit gate: an error in the gate never blocks an update
    local ok, verdict = pcall(judge_modify, job_desc, job_rec, part_list, modify_uid)
    if not ok then
        slurm.log_error("wattsched gate: %s (job update let through)", tostring(verdict))
        return slurm.SUCCESS
    end
    if verdict == "refuse" then
        slurm.log_info("wattsched gate: release of held job %s by uid %s refused",
                       tostring(job_rec.job_id), tostring(modify_uid))
        return ESLURM_JOB_HELD
    end
    if verdict == "hold" then
        slurm.log_info("wattsched gate: job %s of uid %s moved into managed partition %s, held",
                       tostring(job_rec.job_id), tostring(modify_uid), tostring(job_desc.partition))
    end
    return slurm.SUCCESS
end

return slurm.SUCCESS
