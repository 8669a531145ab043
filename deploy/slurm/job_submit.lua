--[[
wattsched submit gate (Slurm job_submit/lua plugin).

Holds every new job of the partitions wattsched manages, so that only the wattsched
daemon starts them (it pins each job to the nodes it chose and releases it). The gate
is fail-open: it holds jobs only while the daemon's heartbeat is fresh, so a stopped or
dead daemon never leaves new jobs stuck.

A held job gets priority 0 and the marker "wattsched:held" in its AdminComment, which
users cannot set: that is how the daemon tells its own holds from anyone else's. Slurm
records a hold set at submission as a user hold (JobHeldUser), so slurm_job_modify below
refuses releases of marked jobs by anyone but root and admin_uids. Jobs submitted held
by their user (sbatch --hold) are left alone.

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

local function gate(job_desc, part_list)
    local conf = read_conf()
    if not managed(job_desc.partition, conf, part_list) then return end
    if job_desc.priority == 0 then return end  -- held by its user at submission
    local age = heartbeat_age(conf.heartbeat_file)
    if age == nil or age > conf.max_age_s or age < -conf.max_age_s then
        slurm.log_info("wattsched gate: heartbeat %s stale or missing, job of %s not held",
                       conf.heartbeat_file, tostring(job_desc.user_name))
        return
    end
    job_desc.priority = 0
    local comment = job_desc.admin_comment
    if comment == nil or comment == "" then
        job_desc.admin_comment = MARKER
    elseif not string.find(comment, MARKER, 1, true) then
        job_desc.admin_comment = comment .. " " .. MARKER
    end
end

function slurm_job_submit(job_desc, part_list, submit_uid)
    -- fail-open: an error in the gate must never reject or hold a job
    local ok, err = pcall(gate, job_desc, part_list)
    if not ok then
        slurm.log_error("wattsched gate: %s (job not held)", tostring(err))
    end
    return slurm.SUCCESS
end

-- Slurm records a hold set at submission as a user hold (JobHeldUser), which the job's
-- owner could release. Only root and the admin uids of wattsched-gate.conf (the daemon
-- runs as one of them) may release a job the gate held.
local function refuse_release(job_desc, job_rec, modify_uid)
    if modify_uid == 0 then return false end
    local conf = read_conf()
    for uid in string.gmatch(conf.admin_uids or "", "%d+") do
        if tonumber(uid) == modify_uid then return false end
    end
    if job_rec == nil or job_rec.priority ~= 0 then return false end
    if not string.find(job_rec.admin_comment or "", MARKER, 1, true) then return false end
    local prio = job_desc.priority
    return prio ~= nil and prio ~= slurm.NO_VAL and prio ~= 0
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
    local ok, refuse = pcall(refuse_release, job_desc, job_rec, modify_uid)
    if ok and refuse then
        slurm.log_user("job %s is held by wattsched (power management) and starts when power allows",
                       tostring(job_rec.job_id))
        return slurm.ERROR
    end
    return slurm.SUCCESS
end

return slurm.SUCCESS
